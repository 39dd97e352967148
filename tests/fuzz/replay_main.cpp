// Copyright (c) executorch-trt authors.
//
// replay_main.cpp: the main() of a fuzz target built without libFuzzer (the default gcc
// build; --config=fuzz links libFuzzer's instead). It runs LLVMFuzzerTestOneInput once on
// every file named on the command line and every regular file under every directory named
// (recursively, in sorted order), so the seed and regression corpora are checked by
// `./bazelw test //tests/fuzz/...` with no clang. Arguments starting with '-' are libFuzzer
// flags and are ignored. Exits 0 after the last input, 2 if there was none to run.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(
               argv[i], fs::directory_options::follow_directory_symlink)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (name corpus files or directories)\n");
    return 2;
  }
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A heap copy of exactly the input's size, as libFuzzer passes it, so a read past the
    // end is caught by ASan (--config=asan).
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  }
  std::fprintf(stderr, "replay: ran %zu inputs, no crash\n", inputs.size());
  return 0;
}
