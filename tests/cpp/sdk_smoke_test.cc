// The ExecuTorch C++ SDK from the pinned wheel links, initialises, and has its ATen kernels
// registered (libexecutorch_kernels_optimized.so loaded through RUNPATH, no LD_LIBRARY_PATH).
#include <gtest/gtest.h>

#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>

namespace {

TEST(SdkSmokeTest, KernelsAreRegistered) {
  executorch::runtime::runtime_init();
  EXPECT_TRUE(executorch::runtime::registry_has_op_function("aten::add.out"));
  EXPECT_TRUE(executorch::runtime::registry_has_op_function("aten::mm.out"));
  EXPECT_FALSE(executorch::runtime::registry_has_op_function("no_such::op.out"));
}

}  // namespace
