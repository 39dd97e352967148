// Copyright (c) executorch-trt authors.

#include "extension/program/program_delegates.h"

#include <algorithm>
#include <cstdint>

#include "core/schema/compile_specs.h"

namespace executorch_trt::extension {

using executorch::runtime::Error;

Error CheckProgramDelegates(const void* data, size_t size, std::string* problem) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  flatbuffers::Verifier verifier(bytes, std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1));
  if (bytes == nullptr || !executorch_flatbuffer::VerifyProgramBuffer(verifier)) {
    *problem = "its program flatbuffer does not verify";
    return Error::InvalidProgram;
  }
  const auto* plans = executorch_flatbuffer::GetProgram(bytes)->execution_plan();
  for (uint32_t p = 0; plans != nullptr && p < plans->size(); ++p) {
    const auto* delegates = plans->Get(p)->delegates();
    for (uint32_t d = 0; delegates != nullptr && d < delegates->size(); ++d) {
      const int64_t spec = schema::IncompleteCompileSpec(*delegates->Get(d));
      if (spec >= 0) {
        const auto* name = plans->Get(p)->name();
        *problem = "cannot load method '" + (name != nullptr ? name->str() : std::string("?")) +
                   "': its delegate " + std::to_string(d) + " has a compile spec (" +
                   std::to_string(spec) + ") without its key or value";
        return Error::InvalidProgram;
      }
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::extension
