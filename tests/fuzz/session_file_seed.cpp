// Copyright (c) executorch-trt authors.
//
// session_file_seed: writes session_file_fuzzer's seed, SeedSession() saved by
// WriteSessionFile for SessionLayout() without its BLAKE2b-256 trailer (the fuzzer appends it).
//
// usage: session_file_seed OUT

#include <cstdio>
#include <filesystem>
#include <string>

#include "extension/llm/blake2b_256.h"
#include "extension/llm/session_file.h"
#include "tests/fuzz/session_file_layout.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: session_file_seed OUT\n");
    return 2;
  }
  namespace llm = executorch_trt::extension::llm;
  const llm::StateLayout layout = executorch_trt::fuzz::SessionLayout();
  const std::string out = argv[1];
  std::string error;
  if (llm::WriteSessionFile(out, layout, executorch_trt::fuzz::SessionFingerprint(),
                            executorch_trt::fuzz::SeedSession(layout),
                            &error) != executorch_trt::Error::Ok) {
    std::fprintf(stderr, "session_file_seed: %s\n", error.c_str());
    return 1;
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(out, ec);
  if (ec || size < sizeof(llm::Blake2b256Digest)) {
    std::fprintf(stderr, "session_file_seed: %s: cannot read its size\n", out.c_str());
    return 1;
  }
  std::filesystem::resize_file(out, size - sizeof(llm::Blake2b256Digest), ec);
  return ec ? 1 : 0;
}
