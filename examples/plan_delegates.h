// plan_delegates.h: which backend runs each delegate of a method of a .pte file, and for a
// TensorRTBackend delegate which engine: what the runners and decode_step_cpp print, so that
// nothing they print implies TensorRT ran when the portable engine ran on the CPU.
//
// Where it comes from. Each method's execution plan lists its delegates: a backend id and a
// reference to the delegate's processed blob, stored inline in the program flatbuffer
// (`backend_delegate_data`) or in a segment after it (ExecuTorch's default: at the extended
// header's segment base offset plus the segment's offset). A TensorRTBackend blob is parsed
// with the backend's own readers (BlobHeader::Parse, checksum included, then
// DelegateMetadata::Parse; docs/formats/delegate_blob.md): its metadata's `engine` is the engine
// TensorRTBackend::init creates for it (it has no other way to choose one), so it is the engine
// that runs that delegate. For the portable engine, the backends its nested program delegates
// to (XnnpackBackend) come from the payload (docs/formats/portable_payload.md). Other backends'
// blobs are not read: their backend id is all that is reported.
//
// Reading. The program flatbuffer is checked by flatbuffers::Verifier before use (as in
// plan_copies.h), and so is a portable engine's nested program; a segment is read only when it
// lies inside the file. A corrupt or truncated file is an error, never a read past a buffer.
#pragma once

#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt::examples {

// One delegate of a method's execution plan.
struct PlanDelegate {
  // The backend id, e.g. "TensorRTBackend" or "XnnpackBackend".
  std::string backend;
  // A TensorRTBackend delegate whose blob was read: the metadata's engine, "portable" or
  // "tensorrt". Empty for other backends, and when the blob cannot be read (`problem`).
  std::string engine;
  // The portable engine: the backend ids its nested program delegates to, each once, in
  // first-use order (e.g. {"XnnpackBackend"}); empty when it runs on ExecuTorch's kernels only.
  std::vector<std::string> nested_backends;
  // Why a TensorRTBackend blob could not be read (then `engine` is empty); else empty.
  std::string problem;

  // What runs it, after the backend id: "engine portable (nested ExecuTorch program with
  // XNNPACK, on the CPU)", "engine tensorrt (TensorRT plan, on the GPU)", "engine unknown
  // (...)" for an unreadable blob; "" for a backend other than TensorRTBackend.
  std::string EngineDescription() const;
  // "portable, CPU" or "tensorrt, GPU"; "unknown" for an unreadable TensorRTBackend blob; ""
  // for other backends.
  std::string EngineLabel() const;
};

// The delegates of one method, in the plan's delegate order.
struct MethodDelegates {
  std::string method;
  std::vector<PlanDelegate> delegates;

  // The delegates grouped by what runs them, in first-use order, e.g. "1 TensorRTBackend
  // delegate, engine portable (nested ExecuTorch program with XNNPACK, on the CPU)",
  // "9 XnnpackBackend delegates", several groups joined by "; "; "no delegate (ExecuTorch's
  // CPU kernels)" when there is none.
  std::string Describe() const;
};

// The delegates of every method of one program, in the program's method order.
struct ProgramDelegates {
  std::vector<MethodDelegates> methods;

  // The entry for `method`, or nullptr if the program has no such method.
  const MethodDelegates* Find(const std::string& method) const;
  // The engines of the TensorRTBackend delegates of `methods` (names the program lacks are
  // skipped), each once, in first-use order: PlanDelegate::EngineLabel, e.g. {"portable, CPU"}.
  std::vector<std::string> EngineLabels(const std::vector<std::string>& methods) const;
  // The same as a phrase: "engine: portable, CPU"; "engines: portable, CPU; tensorrt, GPU"
  // when they differ; "no TensorRTBackend delegate" when there is none.
  std::string EnginesRun(const std::vector<std::string>& methods) const;
};

// Reads the delegates of every method of the .pte at `path`: its program flatbuffer (the
// extended header's program size, or the whole file without one) and the blob of each
// TensorRTBackend delegate (inline, or its segment of the file). On failure returns
// Error::AccessFailed (cannot open or read the file) or Error::InvalidProgram (not an
// ExecuTorch program, a flatbuffer that fails verification, a corrupt extended header, a
// delegate without a blob reference) and sets *error to a message naming `path` and the
// problem. A TensorRTBackend blob that cannot be read (an index out of range, a segment past
// the end of the file, a blob or payload the delegate's readers reject) is no failure: that
// delegate's `problem` says why, and ExecuTorch's loader rejects the program when it loads it.
executorch::runtime::Result<ProgramDelegates> ReadProgramDelegates(const std::string& path,
                                                                   std::string* error);

}  // namespace executorch_trt::examples
