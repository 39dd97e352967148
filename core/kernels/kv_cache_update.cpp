// Copyright (c) executorch-trt authors.

#include "core/kernels/kv_cache_update.h"
#include "core/common/runtime_types.h"
#include "core/kernels/register_once.h"

#include <cinttypes>
#include <cstdint>
#include <cstring>

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

namespace executorch_trt {
namespace {

using executorch::runtime::KernelRuntimeContext;

bool IsContiguous(const Tensor& t) {
  const auto order = t.dim_order();
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) {
      return false;
    }
  }
  return true;
}

// Validates everything; logs and returns false on the first problem.
bool Validate(const Tensor& cache, const Tensor& value, const Tensor& indices, int64_t* dim,
              const Tensor& out) {
  const int64_t rank = cache.dim();
  if (rank < 1) {
    ET_LOG(Error, "kv_cache_update: cache must have rank >= 1, got rank 0.");
    return false;
  }
  if (*dim < -rank || *dim >= rank) {
    ET_LOG(Error, "kv_cache_update: dim %" PRId64 " is out of range for a rank-%" PRId64 " cache.",
           *dim, rank);
    return false;
  }
  if (*dim < 0) {
    *dim += rank;
  }
  if (value.scalar_type() != cache.scalar_type() || out.scalar_type() != cache.scalar_type()) {
    ET_LOG(Error,
           "kv_cache_update: dtypes differ: cache %s, value %s, out %s; all three "
           "must match.",
           executorch::runtime::toString(cache.scalar_type()),
           executorch::runtime::toString(value.scalar_type()),
           executorch::runtime::toString(out.scalar_type()));
    return false;
  }
  if (value.dim() != rank) {
    ET_LOG(Error, "kv_cache_update: value has rank %zd, cache has rank %" PRId64 ".",
           static_cast<ssize_t>(value.dim()), rank);
    return false;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (d != *dim && value.size(d) != cache.size(d)) {
      ET_LOG(Error,
             "kv_cache_update: value.size(%" PRId64 ") is %zd but cache.size(%" PRId64
             ") is %zd; they must match except at dim %" PRId64 ".",
             d, static_cast<ssize_t>(value.size(d)), d, static_cast<ssize_t>(cache.size(d)), *dim);
      return false;
    }
  }
  if (indices.scalar_type() != ScalarType::Long && indices.scalar_type() != ScalarType::Int) {
    ET_LOG(Error, "kv_cache_update: indices must be int64 or int32, got %s.",
           executorch::runtime::toString(indices.scalar_type()));
    return false;
  }
  if (indices.dim() != 1 || indices.size(0) != value.size(*dim)) {
    ET_LOG(Error,
           "kv_cache_update: indices must be 1-D with value.size(dim) = %zd entries, "
           "got rank %zd with %zd entries.",
           static_cast<ssize_t>(value.size(*dim)), static_cast<ssize_t>(indices.dim()),
           static_cast<ssize_t>(indices.numel()));
    return false;
  }
  if (!IsContiguous(cache) || !IsContiguous(value) || !IsContiguous(out) ||
      !IsContiguous(indices)) {
    ET_LOG(Error, "kv_cache_update: all tensors must be contiguous.");
    return false;
  }
  const int64_t limit = cache.size(*dim);
  for (ssize_t i = 0; i < indices.numel(); ++i) {
    const int64_t index = indices.scalar_type() == ScalarType::Long
                              ? indices.const_data_ptr<int64_t>()[i]
                              : indices.const_data_ptr<int32_t>()[i];
    if (index < 0 || index >= limit) {
      ET_LOG(Error,
             "kv_cache_update: indices[%zd] = %" PRId64 " is outside [0, %" PRId64
             ") (cache.size(%" PRId64 ")).",
             static_cast<ssize_t>(i), index, limit, *dim);
      return false;
    }
  }
  return true;
}

// Whether the bytes of a and b intersect.
bool Overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) {
    return false;
  }
  const auto begin_a = reinterpret_cast<uintptr_t>(a.const_data_ptr());
  const auto begin_b = reinterpret_cast<uintptr_t>(b.const_data_ptr());
  return begin_a < begin_b + b.nbytes() && begin_b < begin_a + a.nbytes();
}

}  // namespace

Tensor& KvCacheUpdateOut(KernelRuntimeContext& ctx, const Tensor& cache, const Tensor& value,
                         const Tensor& indices, int64_t dim, Tensor& out) {
  if (!Validate(cache, value, indices, &dim, out)) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  if (executorch::runtime::resize_tensor(out, cache.sizes()) != Error::Ok) {
    ET_LOG(Error,
           "kv_cache_update: out cannot be resized to the cache's shape; bind an "
           "output of the cache's shape.");
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  // After a successful resize out.nbytes() == cache.nbytes(); check anyway so a
  // surprise can never turn into an out-of-bounds write.
  if (out.nbytes() != cache.nbytes() ||
      (cache.nbytes() > 0 &&
       (out.mutable_data_ptr() == nullptr || cache.const_data_ptr() == nullptr)) ||
      (value.nbytes() > 0 && value.const_data_ptr() == nullptr)) {
    ET_LOG(Error,
           "kv_cache_update: out (%zu bytes) does not match cache (%zu bytes) or a "
           "tensor has no storage.",
           out.nbytes(), cache.nbytes());
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  // The rows are read from value (and indices) while out is written: if they share bytes with
  // out (a cache rotated from itself, updated in place), later rows would read written ones.
  if (Overlaps(value, out) || Overlaps(indices, out)) {
    ET_LOG(Error,
           "kv_cache_update: value or indices shares memory with the tensor it writes, so the "
           "update would read rows it has already overwritten; re-export the program (the "
           "exporter copies such an update back instead of writing it in place).");
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  auto* dst = static_cast<uint8_t*>(out.mutable_data_ptr());
  const auto* src_cache = static_cast<const uint8_t*>(cache.const_data_ptr());
  if (static_cast<const void*>(dst) != static_cast<const void*>(src_cache)) {
    std::memmove(dst, src_cache, cache.nbytes());  // out of place: start from the cache
  }
  // View both tensors as [outer, size(dim), inner] and copy one inner row per index.
  size_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) {
    outer *= static_cast<size_t>(cache.size(d));
  }
  size_t row_bytes = executorch::runtime::elementSize(cache.scalar_type());
  for (int64_t d = dim + 1; d < cache.dim(); ++d) {
    row_bytes *= static_cast<size_t>(cache.size(d));
  }
  const size_t cache_rows = static_cast<size_t>(cache.size(dim));
  const size_t value_rows = static_cast<size_t>(value.size(dim));
  const auto* src_value = static_cast<const uint8_t*>(value.const_data_ptr());
  for (size_t i = 0; i < value_rows; ++i) {
    const size_t row = static_cast<size_t>(indices.scalar_type() == ScalarType::Long
                                               ? indices.const_data_ptr<int64_t>()[i]
                                               : indices.const_data_ptr<int32_t>()[i]);
    for (size_t o = 0; o < outer; ++o) {
      std::memcpy(dst + (o * cache_rows + row) * row_bytes,
                  src_value + (o * value_rows + i) * row_bytes, row_bytes);
    }
  }
  return out;
}

namespace {

// Registered at load time (RegisterKernelOnce keeps an existing registration).
const bool kRegistered = [] {
  static const executorch::runtime::Kernel kernel = executorch::extension::make_boxed_kernel(
      kKvCacheUpdateOutOpName, EXECUTORCH_FN(KvCacheUpdateOut, kKvCacheUpdateOutOpName));
  return RegisterKernelOnce(kernel);
}();

}  // namespace
}  // namespace executorch_trt
