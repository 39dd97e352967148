// Copyright (c) executorch-trt authors.
//
// kv_cache_update.h: ExecuTorch CPU kernel for
//
//   executorch_trt::kv_cache_update.out(Tensor cache, Tensor value, Tensor indices,
//                                       int dim, *, Tensor(a!) out) -> Tensor(a!)
//
// Semantics of torch.index_copy: out = cache, then for each i,
// out.select(dim, indices[i]) = value.select(dim, i). The kernel is registered with
// the ExecuTorch kernel registry by a static initializer in kv_cache_update.cpp (link
// with alwayslink / --no-as-needed, or load libexecutorch_trt.so).

#pragma once

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

namespace executorch_trt {

// The unboxed kernel.
//
// Inputs: `cache` (rank >= 1, contiguous), `value` (same dtype and rank as `cache`,
// same sizes except at `dim`), `indices` (1-D int64 or int32, length value.size(dim),
// each in [0, cache.size(dim))), `dim` in [-rank, rank). `out`: same dtype as `cache`,
// shape equal to `cache` (resized if dynamic), contiguous.
//
// In place: when out's data pointer equals cache's (the delegate bound the output to
// the cache's storage), only the rows named by `indices` are written, the rest of the
// cache is untouched and no full copy is made. Otherwise cache is first copied into out.
// Duplicate indices: the last write wins.
//
// Errors: on any invalid input the kernel calls ctx.fail(Error::InvalidArgument) with
// an ET_LOG line naming the argument, the expected and the actual value, writes
// nothing, and returns `out`. It never writes outside `out`'s storage.
// Thread-safety: re-entrant; concurrent calls must not share `out`.
executorch::aten::Tensor& KvCacheUpdateOut(executorch::runtime::KernelRuntimeContext& ctx,
                                           const executorch::aten::Tensor& cache,
                                           const executorch::aten::Tensor& value,
                                           const executorch::aten::Tensor& indices, int64_t dim,
                                           executorch::aten::Tensor& out);

// The fully qualified operator name the kernel is registered under.
inline constexpr const char kKvCacheUpdateOutOpName[] = "executorch_trt::kv_cache_update.out";

}  // namespace executorch_trt
