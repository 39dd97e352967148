// plan_delegates.cpp: see plan_delegates.h. The program flatbuffer (and a portable engine's
// nested program) is read with the C++ code flatc generates from ExecuTorch's own schema
// (//core/schema:program_schema), after flatbuffers::Verifier has checked it.
#include "examples/plan_delegates.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "core/engine/portable/portable_payload.h"
#include "examples/pte_file.h"

namespace executorch_trt::examples {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;

constexpr const char* kTensorRTBackend = "TensorRTBackend";
constexpr const char* kXnnpackBackend = "XnnpackBackend";

// "XNNPACK" for XnnpackBackend, else the backend id itself.
std::string BackendShortName(const std::string& backend) {
  return backend == kXnnpackBackend ? "XNNPACK" : backend;
}

// The backend ids the delegates of every method of the program in `nested` refer to, each
// once, in first-use order. False if `nested` is not a program flatbuffer that verifies.
bool NestedBackends(const AlignedBytes& nested, std::vector<std::string>* backends) {
  if (!VerifiesAsProgram(nested.data(), nested.size())) return false;
  const auto* plans = fb::GetProgram(nested.data())->execution_plan();
  for (uint32_t p = 0; plans != nullptr && p < plans->size(); ++p) {
    const auto* delegates = plans->Get(p)->delegates();
    for (uint32_t d = 0; delegates != nullptr && d < delegates->size(); ++d) {
      const std::string id = Str(delegates->Get(d)->id());
      if (std::find(backends->begin(), backends->end(), id) == backends->end()) {
        backends->push_back(id);
      }
    }
  }
  return true;
}

// Fills `delegate`'s engine and nested backends from its blob, or its `problem`.
void ReadBlob(const AlignedBytes& blob, PlanDelegate* delegate) {
  Result<BlobHeader> header = BlobHeader::Parse(blob.data(), blob.size());
  if (!header.ok()) {
    delegate->problem = std::string("the delegate's blob reader rejects it (") +
                        executorch::runtime::to_string(header.error()) + ")";
    return;
  }
  Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
      header->Metadata(blob.data()), header->required_features, header->format_version);
  if (!metadata.ok()) {
    delegate->problem = std::string("its metadata is invalid (") +
                        executorch::runtime::to_string(metadata.error()) + ")";
    return;
  }
  delegate->engine = EngineKindName(metadata->engine);
  if (metadata->engine != EngineKind::kPortable) return;
  Result<PortablePayload> payload = PortablePayload::Parse(
      header->Payload(blob.data()), static_cast<size_t>(header->payload_size));
  if (!payload.ok()) {
    delegate->problem = std::string("its portable payload is invalid (") +
                        executorch::runtime::to_string(payload.error()) + ")";
    delegate->engine.clear();
    return;
  }
  if (!NestedBackends(AlignedBytes(payload->program, payload->program_size),
                      &delegate->nested_backends)) {
    delegate->problem = "its nested program fails verification";
    delegate->engine.clear();
  }
}

// Where the blob of a delegate is: bytes inside the program flatbuffer, or a range of the
// file. Returns false with *problem set when the reference points nowhere.
struct BlobLocation {
  const uint8_t* inline_data = nullptr;
  uint64_t file_offset = 0;
  uint64_t size = 0;
};

bool LocateBlob(const fb::Program& program, const fb::BackendDelegateDataReference& processed,
                uint64_t segment_base, uint64_t file_size, BlobLocation* where,
                std::string* problem) {
  const uint32_t index = processed.index();
  if (processed.location() == fb::DataLocation::INLINE) {
    const auto* data = program.backend_delegate_data();
    if (data == nullptr || index >= data->size() || data->Get(index)->data() == nullptr) {
      *problem = "inline blob " + std::to_string(index) + " is out of range";
      return false;
    }
    where->inline_data = data->Get(index)->data()->data();
    where->size = data->Get(index)->data()->size();
    return true;
  }
  const auto* segments = program.segments();
  if (segments == nullptr || index >= segments->size()) {
    *problem = "segment " + std::to_string(index) + " is out of range";
    return false;
  }
  const fb::DataSegment* segment = segments->Get(index);
  uint64_t end = 0;
  if (segment_base == 0 ||
      __builtin_add_overflow(segment_base, segment->offset(), &where->file_offset) ||
      __builtin_add_overflow(where->file_offset, segment->size(), &end) || end > file_size) {
    *problem = "segment " + std::to_string(index) + " lies past the end of the file (" +
               std::to_string(file_size) + " bytes)";
    return false;
  }
  where->size = segment->size();
  return true;
}

}  // namespace

std::string PlanDelegate::EngineDescription() const {
  if (backend != kTensorRTBackend) return "";
  if (engine.empty()) return "engine unknown (" + problem + ")";
  if (engine == "tensorrt") return "engine tensorrt (TensorRT plan, on the GPU)";
  if (engine != "portable") return "engine " + engine;
  if (nested_backends.empty()) {
    return "engine portable (nested ExecuTorch program on ExecuTorch's kernels, on the CPU)";
  }
  std::string with;
  for (size_t i = 0; i < nested_backends.size(); ++i) {
    with += (i == 0                            ? ""
             : i + 1 == nested_backends.size() ? " and "
                                               : ", ") +
            BackendShortName(nested_backends[i]);
  }
  return "engine portable (nested ExecuTorch program with " + with + ", on the CPU)";
}

std::string PlanDelegate::EngineLabel() const {
  if (backend != kTensorRTBackend) return "";
  if (engine.empty()) return "unknown";
  if (engine == "portable") return "portable, CPU";
  if (engine == "tensorrt") return "tensorrt, GPU";
  return engine;
}

std::string MethodDelegates::Describe() const {
  if (delegates.empty()) return "no delegate (ExecuTorch's CPU kernels)";
  // (backend, engine description) -> count, in first-use order.
  std::vector<std::pair<std::pair<std::string, std::string>, int>> groups;
  for (const PlanDelegate& d : delegates) {
    const auto key = std::make_pair(d.backend, d.EngineDescription());
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& group) { return group.first == key; });
    if (it == groups.end()) {
      groups.emplace_back(key, 1);
    } else {
      ++it->second;
    }
  }
  std::string text;
  for (const auto& [key, count] : groups) {
    text += (text.empty() ? "" : "; ") + std::to_string(count) + " " + key.first +
            (count == 1 ? " delegate" : " delegates") + (key.second.empty() ? "" : ", ") +
            key.second;
  }
  return text;
}

const MethodDelegates* ProgramDelegates::Find(const std::string& method) const {
  for (const auto& m : methods) {
    if (m.method == method) return &m;
  }
  return nullptr;
}

std::vector<std::string> ProgramDelegates::EngineLabels(
    const std::vector<std::string>& names) const {
  std::vector<std::string> labels;
  for (const std::string& name : names) {
    const MethodDelegates* method = Find(name);
    if (method == nullptr) continue;
    for (const PlanDelegate& d : method->delegates) {
      const std::string label = d.EngineLabel();
      if (!label.empty() && std::find(labels.begin(), labels.end(), label) == labels.end()) {
        labels.push_back(label);
      }
    }
  }
  return labels;
}

std::string ProgramDelegates::EnginesRun(const std::vector<std::string>& names) const {
  const std::vector<std::string> labels = EngineLabels(names);
  if (labels.empty()) return "no TensorRTBackend delegate";
  std::string text = labels.size() == 1 ? "engine: " : "engines: ";
  for (size_t i = 0; i < labels.size(); ++i) text += (i == 0 ? "" : "; ") + labels[i];
  return text;
}

Result<ProgramDelegates> ReadProgramDelegates(const std::string& path, std::string* error) {
  const std::string prefix = path + ": cannot read the program's delegates: ";
  Result<PteFile> file = PteFile::Open(path, prefix, error);
  if (!file.ok()) {
    return file.error();
  }
  const uint64_t file_size = file->file_size();
  const uint64_t program_size = file->program_size();
  const uint64_t segment_base = file->segment_base();
  if (program_size < 8 || program_size >= kMaxFlatbufferSize) {
    *error = prefix + "a program flatbuffer of " + std::to_string(program_size) +
             " bytes (not an ExecuTorch program, or more than a flatbuffer can hold)";
    return Error::InvalidProgram;
  }
  AlignedBytes bytes(static_cast<size_t>(program_size));
  if (!file->ReadAt(0, bytes.data(), bytes.size())) {
    *error = path + ": cannot read " + std::to_string(program_size) + " bytes";
    return Error::AccessFailed;
  }
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), fb::ProgramIdentifier())) {
    *error = prefix + "not an ExecuTorch program (file identifier is not '" +
             fb::ProgramIdentifier() + "')";
    return Error::InvalidProgram;
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!fb::VerifyProgramBuffer(verifier)) {
    *error = prefix +
             "the program flatbuffer fails verification against ExecuTorch's schema "
             "(the file is corrupt or truncated: re-export it)";
    return Error::InvalidProgram;
  }
  const fb::Program& program = *fb::GetProgram(bytes.data());
  ProgramDelegates result;
  const auto* plans = program.execution_plan();
  for (uint32_t p = 0; plans != nullptr && p < plans->size(); ++p) {
    MethodDelegates method;
    method.method = Str(plans->Get(p)->name());
    const auto* delegates = plans->Get(p)->delegates();
    for (uint32_t d = 0; delegates != nullptr && d < delegates->size(); ++d) {
      const fb::BackendDelegate* entry = delegates->Get(d);
      PlanDelegate delegate;
      delegate.backend = Str(entry->id());
      if (entry->processed() == nullptr) {
        *error = prefix + "method '" + method.method + "', delegate " + std::to_string(d) +
                 " has no blob reference (the file is corrupt: re-export it)";
        return Error::InvalidProgram;
      }
      if (delegate.backend == kTensorRTBackend) {
        BlobLocation where;
        if (LocateBlob(program, *entry->processed(), segment_base, file_size, &where,
                       &delegate.problem)) {
          if (where.inline_data != nullptr) {
            ReadBlob(AlignedBytes(where.inline_data, static_cast<size_t>(where.size)), &delegate);
          } else {
            AlignedBytes blob(static_cast<size_t>(where.size));
            if (file->ReadAt(where.file_offset, blob.data(), blob.size())) {
              ReadBlob(blob, &delegate);
            } else {
              delegate.problem = "cannot read its segment";
            }
          }
        }
      }
      method.delegates.push_back(std::move(delegate));
    }
    result.methods.push_back(std::move(method));
  }
  return result;
}

}  // namespace executorch_trt::examples
