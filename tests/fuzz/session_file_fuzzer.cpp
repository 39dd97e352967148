// Copyright (c) executorch-trt authors.
//
// session_file_fuzzer: extension/llm's session file reader (ParseSessionFile, what
// LlmProgram::LoadSession and //examples:llm_session run on a --session file) on arbitrary
// bytes. The input is a session file without its BLAKE2b-256 trailer, which the harness
// appends: the checksum would otherwise refuse nearly every mutation before the header is
// read, and a file that lies under a valid checksum is what the reader's other checks exist
// for. An accepted file must leave what a Session indexes without further checks: at most
// max_context_len tokens, every buffer at its size, snapshots at held positions with every
// non-positional buffer's value at its size.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "extension/llm/blake2b_256.h"
#include "extension/llm/session_file.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/session_file_layout.h"

using executorch_trt::fuzz::Check;
namespace llm = executorch_trt::extension::llm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const llm::StateLayout layout = executorch_trt::fuzz::SessionLayout();
  static const llm::ProgramFingerprint fingerprint = executorch_trt::fuzz::SessionFingerprint();
  std::vector<uint8_t> file(data, data + size);
  llm::Blake2b256 hash;
  hash.Update(file.data(), file.size());
  const llm::Blake2b256Digest digest = hash.Digest();
  file.insert(file.end(), digest.begin(), digest.end());

  llm::SessionContents contents;
  contents.state = executorch_trt::fuzz::FreshSessionState(layout);
  std::string error;
  const executorch_trt::Error err = llm::ParseSessionFile(file.data(), file.size(), "<fuzz input>",
                                                          layout, fingerprint, &contents, &error);
  if (err != executorch_trt::Error::Ok) {
    Check(!error.empty(), "a refused file says why");
    return 0;
  }
  const size_t held = contents.tokens.size();
  Check(held <= static_cast<size_t>(layout.capacity()), "at most max_context_len tokens");
  Check(contents.state.size() == layout.buffers().size(), "every buffer");
  for (size_t i = 0; i < contents.state.size(); ++i) {
    Check(contents.state[i].size() == layout.buffers()[i].nbytes, "buffers keep their size");
  }
  for (const auto& [position, values] : contents.snapshots) {
    Check(position >= 0 && static_cast<size_t>(position) <= held, "snapshots at held positions");
    Check(values.size() == layout.other().size(), "a value of every non-positional buffer");
    for (size_t k = 0; k < values.size(); ++k) {
      Check(values[k].size() == layout.buffers()[layout.other()[k]].nbytes,
            "snapshot values at the buffer's size");
    }
  }
  for (const std::string& name : contents.counters) {
    const size_t i = layout.Find(name);
    Check(i < layout.buffers().size() && layout.buffers()[i].counter,
          "counters are the program's token counters");
  }
  return 0;
}
