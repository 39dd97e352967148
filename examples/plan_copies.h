// plan_copies.h: the copies of state ExecuTorch itself makes on every call of a method, read
// off the method's execution plan in a .pte file.
//
// What it counts. A mutable buffer (a KV cache, a step counter) that a method updates but does
// not update in place is kept correct by ExecuTorch with an explicit write-back: an
// `aten::copy_` of the new value into the buffer, inserted at export by
// `insert_write_back_for_buffers_pass` and emitted as a `KernelCall` in the execution plan. It
// runs on every call and is invisible to the delegate's own copy counter
// (core/binding/copy_counter.h). This file finds every `KernelCall` whose operator is
//   - `aten::copy_` (any overload): destination = the last argument (the emitter appends the
//     returned value, which for `copy_` is `self`), bytes = the destination's size;
//   - `executorch_prim::et_copy_index`: destination = argument 0 (`copy_to`), bytes = the size
//     of argument 1 (`copy_from`), which is what the kernel copies
//     (kernels/prim_ops/et_copy_index.cpp in ExecuTorch);
// and reports each with the destination's name (`extra_tensor_info.fully_qualified_name`,
// recorded when the program was exported with `emit_mutable_buffer_names=True`) and its bytes
// = static sizes x element size. This is the rule `benchmarks/copy_accounting.py` applies to
// the Python form of the program. Copies inside a delegate are not here: the delegate counts
// its own.
//
// Exactness. Each instruction is counted once per call. That is exact for a straight-line
// plan; a plan with control flow (`JumpFalseCall`) may skip an instruction or run it several
// times, and a tensor with a dynamic shape records its upper bound: `MethodCopies::exact` says
// which.
//
// Reading. `Program`/`Method` expose no execution plan, so it is read from the file with
// FlatBuffers: C++ code that Debian's flatc generates at build time from the schema in the
// pinned ExecuTorch wheel (`executorch/schema/program.fbs`, //core/schema:program_schema), used
// only after `flatbuffers::Verifier` has checked the whole program flatbuffer (every offset,
// length and alignment within the bytes read from the file): a corrupt or truncated file is an
// error, never a read past the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt::examples {

// One copy instruction in a method's execution plan.
struct PlanCopy {
  // The operator's name, e.g. "aten::copy_" or "executorch_prim::et_copy_index".
  std::string op;
  // The destination's fully qualified name (e.g. "key_cache_0"); empty if the program records
  // none (exported without `emit_mutable_buffer_names=True`).
  std::string destination_name;
  // The destination's index in the plan's values (identifies it when it has no name).
  int32_t destination_value = -1;
  // Bytes one execution of the instruction copies.
  uint64_t bytes = 0;
  // Position of the instruction: chain, then index in the chain.
  uint32_t chain = 0;
  uint32_t instruction = 0;

  // The destination for messages: "'key_cache_0'" or "value #17 (unnamed)".
  std::string DestinationLabel() const;
};

// The copies one call of a method makes, in plan order.
struct MethodCopies {
  std::string method;
  std::vector<PlanCopy> copies;
  // False if `BytesPerCall()` is not exact: the plan has control flow (a copy may run zero or
  // several times per call) or a copy involves a tensor with a dynamic shape (upper bound).
  bool exact = true;

  // Sum of `copies[i].bytes`.
  uint64_t BytesPerCall() const;
};

// The copies of every method of one program, in the program's method order.
struct ProgramCopies {
  std::vector<MethodCopies> methods;

  // The entry for `method`, or nullptr if the program has no such method.
  const MethodCopies* Find(const std::string& method) const;
  // The program's method names, comma-separated (for messages).
  std::string MethodNames() const;
};

// Reads the copies of every method from `data[0, size)`, the head of a .pte file (at least
// the program flatbuffer; segments after it are not needed, and nothing past flatbuffers' 2 GiB
// limit is looked at). `data` needs no particular alignment (an unaligned buffer is copied
// first). `source` names the data in messages (e.g. the file path). On failure returns
// Error::InvalidProgram and sets *error to a message naming `source` and what is wrong (not an
// ExecuTorch program, a buffer that fails flatbuffers' verifier, a value or operator index out
// of range, an unknown scalar type, ...). Never reads outside `data[0, size)`.
executorch::runtime::Result<ProgramCopies> ParseProgramCopies(const uint8_t* data, size_t size,
                                                              const std::string& source,
                                                              std::string* error);

// Reads the .pte at `path` (only its program flatbuffer: the extended header's program size,
// or the whole file if it has none) and parses it with ParseProgramCopies. On failure returns
// Error::AccessFailed (cannot open or read the file) or Error::InvalidProgram, and sets *error
// to a message naming `path` and the problem.
executorch::runtime::Result<ProgramCopies> ReadProgramCopies(const std::string& path,
                                                             std::string* error);

}  // namespace executorch_trt::examples
