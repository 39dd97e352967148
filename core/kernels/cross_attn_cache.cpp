// Copyright (c) executorch-trt authors.

#include "core/kernels/cross_attn_cache.h"

#include <cinttypes>
#include <cstring>

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "core/common/process_counter.h"
#include "core/common/runtime_types.h"
#include "core/kernels/register_once.h"

namespace executorch_trt {
namespace {

using executorch::runtime::KernelRuntimeContext;

ProcessCounter cache_updates;

bool IsContiguous(const Tensor& t) { return executorch::runtime::tensor_is_contiguous(t); }

// Resizes `out` to `like`'s sizes and checks it then describes the same bytes as `like`.
bool MatchOutput(const char* op, const char* name, const Tensor& like, Tensor& out) {
  if (out.scalar_type() != like.scalar_type()) {
    ET_LOG(Error, "%s: %s has dtype %s, expected %s.", op, name,
           executorch::runtime::toString(out.scalar_type()),
           executorch::runtime::toString(like.scalar_type()));
    return false;
  }
  if (executorch::runtime::resize_tensor(out, like.sizes()) != Error::Ok ||
      out.nbytes() != like.nbytes() || !IsContiguous(out)) {
    ET_LOG(Error, "%s: %s cannot take the shape of its input (%zu bytes, contiguous).", op, name,
           like.nbytes());
    return false;
  }
  if (like.nbytes() > 0 &&
      (out.mutable_data_ptr() == nullptr || like.const_data_ptr() == nullptr)) {
    ET_LOG(Error, "%s: %s or its input has no storage.", op, name);
    return false;
  }
  return true;
}

// Copies `src` into `dst` unless they already share storage.
void CopyUnlessSame(const Tensor& src, Tensor& dst) {
  if (src.nbytes() > 0 && dst.mutable_data_ptr() != src.const_data_ptr()) {
    std::memmove(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes());
  }
}

bool ValidateUpdate(const Tensor& value, const Tensor& cache) {
  constexpr const char* kOp = "update_cross_attn_cache";
  if (value.dim() != 4 || cache.dim() != 4) {
    ET_LOG(Error, "%s: value and cache must be 4-D [B, H, S, D], got rank %zd and %zd.", kOp,
           static_cast<ssize_t>(value.dim()), static_cast<ssize_t>(cache.dim()));
    return false;
  }
  if (value.scalar_type() != cache.scalar_type()) {
    ET_LOG(Error, "%s: value dtype %s differs from cache dtype %s.", kOp,
           executorch::runtime::toString(value.scalar_type()),
           executorch::runtime::toString(cache.scalar_type()));
    return false;
  }
  for (int d : {0, 1, 3}) {
    if (value.size(d) != cache.size(d)) {
      ET_LOG(Error, "%s: value.size(%d) is %zd but cache.size(%d) is %zd.", kOp, d,
             static_cast<ssize_t>(value.size(d)), d, static_cast<ssize_t>(cache.size(d)));
      return false;
    }
  }
  if (value.size(2) > cache.size(2)) {
    ET_LOG(Error, "%s: value sequence length %zd exceeds the cache's %zd.", kOp,
           static_cast<ssize_t>(value.size(2)), static_cast<ssize_t>(cache.size(2)));
    return false;
  }
  if (!IsContiguous(value) || !IsContiguous(cache)) {
    ET_LOG(Error, "%s: value and cache must be contiguous.", kOp);
    return false;
  }
  if (value.nbytes() > 0 && value.const_data_ptr() == nullptr) {
    ET_LOG(Error, "%s: value has no storage.", kOp);
    return false;
  }
  return true;
}

}  // namespace

Tensor& UpdateCrossAttnCacheOut(KernelRuntimeContext& ctx, const Tensor& value, const Tensor& cache,
                                Tensor& out) {
  if (!ValidateUpdate(value, cache) || !MatchOutput("update_cross_attn_cache", "out", cache, out)) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  CopyUnlessSame(cache, out);
  // Each [b, h] block of the cache is S_max rows of D; the value's block is its first S rows.
  const size_t blocks = static_cast<size_t>(cache.size(0) * cache.size(1));
  const size_t value_block = value.nbytes() / (blocks > 0 ? blocks : 1);
  const size_t cache_block = cache.nbytes() / (blocks > 0 ? blocks : 1);
  auto* dst = static_cast<uint8_t*>(out.mutable_data_ptr());
  const auto* src = static_cast<const uint8_t*>(value.const_data_ptr());
  for (size_t i = 0; i < blocks && value_block > 0; ++i) {
    std::memcpy(dst + i * cache_block, src + i * value_block, value_block);
  }
  cache_updates.Add(1);
  return out;
}

uint64_t CrossAttnCacheUpdates() { return cache_updates.Read(); }

void AliasOut(KernelRuntimeContext& ctx, Span<EValue*> stack) {
  constexpr const char* kOp = "alias";
  if (stack.size() < 4 || stack.size() > 6) {
    ET_LOG(Error,
           "%s.out: expected 4 arguments (x, y, out0, out1) and up to 2 return values, got "
           "%zu values.",
           kOp, stack.size());
    ctx.fail(Error::InvalidArgument);
    return;
  }
  for (size_t i = 0; i < 4; ++i) {
    if (stack[i] == nullptr || !stack[i]->isTensor()) {
      ET_LOG(Error, "%s.out: argument %zu is not a tensor.", kOp, i);
      ctx.fail(Error::InvalidArgument);
      return;
    }
  }
  const Tensor& x = stack[0]->toTensor();
  const Tensor& y = stack[1]->toTensor();
  Tensor& out0 = stack[2]->toTensor();
  Tensor& out1 = stack[3]->toTensor();
  if (!IsContiguous(x) || !IsContiguous(y) || !MatchOutput("alias.out", "out0", x, out0) ||
      !MatchOutput("alias.out", "out1", y, out1)) {
    ctx.fail(Error::InvalidArgument);
    return;
  }
  CopyUnlessSame(x, out0);
  CopyUnlessSame(y, out1);
  // ExecuTorch's emitter passes the (out0, out1) return as one list of the out values
  // (5 values); a caller with one value per return gets them set.
  if (stack.size() == 6) {
    *stack[4] = *stack[2];
    *stack[5] = *stack[3];
  }
}

namespace {

// Registered at load time (RegisterKernelOnce keeps an existing registration).
const bool kRegistered = [] {
  static const executorch::runtime::Kernel update = executorch::extension::make_boxed_kernel(
      kUpdateCrossAttnCacheOutOpName,
      EXECUTORCH_FN(UpdateCrossAttnCacheOut, kUpdateCrossAttnCacheOutOpName));
  static const executorch::runtime::Kernel alias(kAliasOutOpName, AliasOut);
  const bool update_ok = RegisterKernelOnce(update);
  return RegisterKernelOnce(alias) && update_ok;
}();

}  // namespace
}  // namespace executorch_trt

extern "C" __attribute__((visibility("default"))) uint64_t executorch_trt_cross_attn_cache_updates(
    void) {
  return executorch_trt::CrossAttnCacheUpdates();
}
