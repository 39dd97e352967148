// Copyright (c) executorch-trt authors.
//
// cross_attn_cache.h: ExecuTorch CPU kernels for the out variants of ExecuTorch's torch.cond
// cache ops (executorch/extension/llm/custom_ops/custom_ops.py defines the functional ops;
// executorch_trt.cross_attn_ops defines these overloads):
//
//   executorch::update_cross_attn_cache.out(Tensor value, Tensor cache, *, Tensor(a!) out)
//       -> Tensor(a!)
//   executorch::alias.out(Tensor x, Tensor y, *, Tensor(a!) out0, Tensor(b!) out1)
//       -> (Tensor(a!), Tensor(b!))
//
// Both are registered with ExecuTorch's kernel registry by a static initializer in
// cross_attn_cache.cpp (link with alwayslink, or load libexecutorch_trt.so), so they run in
// a plain ExecuTorch program as well as inside the delegate's nested programs.

#pragma once

#include <cstdint>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

namespace executorch_trt {

// update_cross_attn_cache.out: out = cache with out[:, :, :S, :] = value.
//
// Inputs: `value` [B, H, S, D] and `cache` [B, H, S_max, D], rank 4, same dtype, S <= S_max,
// contiguous (the checks of custom_ops.py's _validate_cross_attn_cache_params). `out`: the
// cache's dtype and shape (resized if dynamic), contiguous.
// In place: when out's storage is the cache's (the planned case), only the first S rows of
// each [B, H] block are written. Otherwise the cache is copied into out first.
// Errors: ctx.fail(Error::InvalidArgument) with an ET_LOG line naming the argument and the
// expected and actual value; nothing is written. Never writes outside out's storage.
executorch::aten::Tensor& UpdateCrossAttnCacheOut(executorch::runtime::KernelRuntimeContext& ctx,
                                                  const executorch::aten::Tensor& value,
                                                  const executorch::aten::Tensor& cache,
                                                  executorch::aten::Tensor& out);

// alias.out, boxed (two outputs): stack = [x, y, out0, out1] followed by the return: one
// value (ExecuTorch's emitter: a list of the out values, left as it is) or two (set to out0
// and out1). out0 = x, out1 = y: no copy when an output already is its input's storage, a
// copy otherwise. Errors: ctx.fail(Error::InvalidArgument) for fewer than 4 or more than 6
// values, a non-tensor argument, or an output whose dtype or size differs from its input.
void AliasOut(executorch::runtime::KernelRuntimeContext& ctx,
              executorch::runtime::Span<executorch::runtime::EValue*> stack);

// How many times update_cross_attn_cache.out has written a cache in this process (all
// programs, all threads; callers take deltas). Each call is one run of a torch.cond
// recompute branch, so a decode step that reuses its cross-attention caches adds 0: tests
// and the runner read it to prove the branch not taken costs nothing. Thread-safe.
uint64_t CrossAttnCacheUpdates();

// The fully qualified operator names the kernels are registered under.
inline constexpr const char kUpdateCrossAttnCacheOutOpName[] =
    "executorch::update_cross_attn_cache.out";
inline constexpr const char kAliasOutOpName[] = "executorch::alias.out";

}  // namespace executorch_trt

// C entry point for ctypes (Python): CrossAttnCacheUpdates().
extern "C" uint64_t executorch_trt_cross_attn_cache_updates(void);
