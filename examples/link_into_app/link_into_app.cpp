// An existing ExecuTorch C++ application that runs programs exported with executorch_trt.
//
// Nothing in the source names the delegate: linking it in is enough. TensorRTBackend and the
// delegate's kernels register themselves from static initializers when the library is loaded,
// so the link must keep them: with Bazel, depend on //core:executorch_trt_static (alwayslink);
// outside Bazel, link libexecutorch_trt.so with -Wl,--no-as-needed (no symbol of it is
// referenced). Link exactly one of the two into a process.
//
// usage: link_into_app MODEL.pte
// Runs method "forward" of export_cache_model.py's program (x float32 [1, 8], pos int64 [1])
// for steps 0..3 with pos = step and x[j] = 0.25 * (step + 1) - 0.125 * j, and prints each
// output as `step K: v0 ... v7`. The program's mutable buffer persists across the calls (the
// Module keeps the method loaded). Exit 0; 1 when the program or method does not load or
// execute (ExecuTorch logs why, e.g. "Backend TensorRTBackend is not registered"); 2 on bad
// usage.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

namespace {

using executorch::extension::make_tensor_ptr;
using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;

constexpr int kSteps = 4;
constexpr int kWidth = 8;
constexpr const char* kMethod = "forward";

int Fail(const std::string& what, Error error) {
  std::fprintf(stderr, "link_into_app: %s failed (ExecuTorch error 0x%x); see the log above\n",
               what.c_str(), static_cast<unsigned>(error));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.pte\n", argv[0]);
    return 2;
  }
  Module module(argv[1]);
  if (const Error error = module.load_method(kMethod); error != Error::Ok) {
    return Fail(std::string("loading method '") + kMethod + "' of " + argv[1], error);
  }
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> x(kWidth);
    for (int j = 0; j < kWidth; ++j) {
      x[j] = 0.25f * static_cast<float>(step + 1) - 0.125f * static_cast<float>(j);
    }
    auto input = make_tensor_ptr({1, kWidth}, std::move(x));
    auto pos = make_tensor_ptr({1}, std::vector<int64_t>{step});
    const auto outputs = module.execute(kMethod, {EValue(*input), EValue(*pos)});
    if (!outputs.ok()) {
      return Fail("step " + std::to_string(step) + " of '" + kMethod + "'", outputs.error());
    }
    if (outputs->size() != 1 || !(*outputs)[0].isTensor() ||
        (*outputs)[0].toTensor().scalar_type() != executorch::aten::ScalarType::Float ||
        (*outputs)[0].toTensor().numel() != kWidth) {
      std::fprintf(stderr, "link_into_app: '%s' must return one float32 tensor of %d values\n",
                   kMethod, kWidth);
      return 1;
    }
    const float* values = (*outputs)[0].toTensor().const_data_ptr<float>();
    std::printf("step %d:", step);
    for (int j = 0; j < kWidth; ++j) {
      std::printf(" %.9g", static_cast<double>(values[j]));
    }
    std::printf("\n");
  }
  return 0;
}
