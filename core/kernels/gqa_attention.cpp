// Copyright (c) executorch-trt authors.

#include "core/kernels/gqa_attention.h"
#include "core/common/process_counter.h"
#include "core/common/runtime_types.h"
#include "core/kernels/register_once.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/thread_parallel_interface.h>
#include <executorch/runtime/platform/log.h>

namespace executorch_trt {
namespace {

using executorch::runtime::KernelRuntimeContext;

ProcessCounter positions_read;

// ThreadSanitizer cannot see the synchronisation inside ExecuTorch's threadpool (a prebuilt,
// uninstrumented pthreadpool), so it would report the caller's writes of the inputs and the
// workers' reads of them as races. These tell it what the pool guarantees: a task starts after
// parallel_for was called, and parallel_for returns after every task ended.
// A task reads the token before anything of the call (its closure included), so the tokens are
// globals, not the caller's locals.
char pool_start, pool_done;
#if defined(__SANITIZE_THREAD__)
void PoolHandOff(char* token) { __tsan_release(token); }
void PoolTakeOver(char* token) { __tsan_acquire(token); }
#else
void PoolHandOff(char*) {}
void PoolTakeOver(char*) {}
#endif

// The mask broadcast to [B, H_q, T, S]: element (b, h, t, s) is at
// b * stride[0] + h * stride[1] + t * stride[2] + s * stride[3] (a size-1 dimension gets
// stride 0).
struct MaskView {
  const bool* bools = nullptr;    // set for a bool mask
  const float* floats = nullptr;  // set for a float mask
  size_t stride[4] = {0, 0, 0, 0};
};

bool CheckTensor(const char* name, const Tensor& t, int rank) {
  if (t.scalar_type() != ScalarType::Float) {
    ET_LOG(Error, "gqa_attention: %s must be float32, got %s.", name,
           executorch::runtime::toString(t.scalar_type()));
    return false;
  }
  if (t.dim() != rank) {
    ET_LOG(Error, "gqa_attention: %s must have rank %d, got rank %zd.", name, rank,
           static_cast<ssize_t>(t.dim()));
    return false;
  }
  if (!executorch::runtime::tensor_is_contiguous(t)) {
    ET_LOG(Error, "gqa_attention: %s must be contiguous.", name);
    return false;
  }
  if (t.numel() > 0 && t.const_data_ptr() == nullptr) {
    ET_LOG(Error, "gqa_attention: %s has no storage.", name);
    return false;
  }
  return true;
}

// Checks the mask against [B, H_q, T, S] and fills `view`; logs and returns false otherwise.
bool MakeMaskView(const Tensor& mask, const ssize_t full[4], MaskView* view) {
  if (mask.scalar_type() == ScalarType::Bool) {
    view->bools = mask.const_data_ptr<bool>();
  } else if (mask.scalar_type() == ScalarType::Float) {
    view->floats = mask.const_data_ptr<float>();
  } else {
    ET_LOG(Error, "gqa_attention: attn_mask must be bool or float32, got %s.",
           executorch::runtime::toString(mask.scalar_type()));
    return false;
  }
  if (mask.dim() > 4 || !executorch::runtime::tensor_is_contiguous(mask)) {
    ET_LOG(Error, "gqa_attention: attn_mask must be contiguous with rank <= 4, got rank %zd.",
           static_cast<ssize_t>(mask.dim()));
    return false;
  }
  if (mask.numel() > 0 && mask.const_data_ptr() == nullptr) {
    ET_LOG(Error, "gqa_attention: attn_mask has no storage.");
    return false;
  }
  ssize_t sizes[4] = {1, 1, 1, 1};
  for (ssize_t d = 0; d < mask.dim(); ++d) {
    sizes[4 - mask.dim() + d] = mask.size(d);
  }
  static const char* const kNames[4] = {"batch", "query heads", "query length", "key length"};
  for (int d = 0; d < 4; ++d) {
    if (sizes[d] != 1 && sizes[d] != full[d]) {
      ET_LOG(Error,
             "gqa_attention: attn_mask size %zd for the %s does not broadcast to %zd (it must "
             "be 1 or %zd).",
             static_cast<ssize_t>(sizes[d]), kNames[d], static_cast<ssize_t>(full[d]),
             static_cast<ssize_t>(full[d]));
      return false;
    }
  }
  // Contiguous strides of the mask's own sizes, 0 where it broadcasts.
  size_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    view->stride[d] = sizes[d] == 1 ? 0 : stride;
    stride *= static_cast<size_t>(sizes[d]);
  }
  return true;
}

// Key positions [begin, end) outside which the mask allows nothing.
struct KeySpan {
  ssize_t begin = 0;
  ssize_t end = 0;
};

// Whether mask position s of the row at `row` is allowed (true bool, or a float other than -inf).
bool Allowed(const MaskView& mask, size_t row, ssize_t s) {
  const size_t m = row + static_cast<size_t>(s) * mask.stride[3];
  if (mask.bools != nullptr) {
    return mask.bools[m];
  }
  return mask.floats == nullptr || mask.floats[m] != -std::numeric_limits<float>::infinity();
}

// The allowed span of a mask row within [0, limit). A bool row (the usual decode mask: the
// filled positions true, the rest of the capacity false) is scanned eight entries at a time,
// so finding where the filled positions end costs a fraction of reading them.
KeySpan AllowedSpan(const MaskView& mask, size_t row, ssize_t limit) {
  KeySpan span{0, limit};
  if (mask.bools != nullptr && mask.stride[3] == 1) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(mask.bools + row);
    auto zero_word = [&](ssize_t at) {
      uint64_t word;
      std::memcpy(&word, bytes + at, sizeof(word));
      return word == 0;
    };
    while (span.end >= 8 && zero_word(span.end - 8)) {
      span.end -= 8;
    }
    while (span.begin + 8 <= span.end && zero_word(span.begin)) {
      span.begin += 8;
    }
  }
  while (span.end > span.begin && !Allowed(mask, row, span.end - 1)) {
    --span.end;
  }
  while (span.begin < span.end && !Allowed(mask, row, span.begin)) {
    ++span.begin;
  }
  return span;
}

// What every output row reads: the inputs, their sizes, and the mask.
struct AttentionInputs {
  const float* q;
  const float* k;
  const float* v;
  MaskView mask;
  float scale;
  bool is_causal;
  ssize_t q_heads, q_len, depth, kv_heads, kv_len, v_depth;
};

// Dot and AttendRowBody are inlined into each AttendRow variant below, which compiles them for
// its instruction set.
#define GQA_INLINE inline __attribute__((always_inline))

// a . b over n floats, in eight partial sums the compiler keeps in vector registers.
GQA_INLINE float Dot(const float* a, const float* b, ssize_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  ssize_t e = 0;
  for (; e + 8 <= n; e += 8) {
    for (int j = 0; j < 8; ++j) {
      partial[j] += a[e + j] * b[e + j];
    }
  }
  float total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  for (; e < n; ++e) {
    total += a[e] * b[e];
  }
  return total;
}

// Output row `row` (flattened [B, H_q, T]) of softmax(q k^T * scale + mask) v, over the key
// positions the mask allows: the scores of the allowed span first, then their softmax, then
// the weighted sum of the value rows. Returns how many key positions it read.
GQA_INLINE uint64_t AttendRowBody(const AttentionInputs& in, size_t row, float* acc) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const ssize_t t = static_cast<ssize_t>(row % in.q_len);
  const ssize_t h = static_cast<ssize_t>((row / in.q_len) % in.q_heads);
  const ssize_t b = static_cast<ssize_t>(row / (in.q_len * in.q_heads));
  const MaskView& mask = in.mask;
  const size_t mask_row = b * mask.stride[0] + h * mask.stride[1] + t * mask.stride[2];
  const KeySpan span =
      AllowedSpan(mask, mask_row, in.is_causal ? std::min(in.kv_len, t + 1) : in.kv_len);
  const bool* allow = mask.bools != nullptr ? mask.bools + mask_row : nullptr;
  const float* bias = mask.floats != nullptr ? mask.floats + mask_row : nullptr;
  const ssize_t kv = b * in.kv_heads + h / (in.q_heads / in.kv_heads);
  const float* k_head = in.k + static_cast<size_t>(kv) * in.kv_len * in.depth;
  const float* v_head = in.v + static_cast<size_t>(kv) * in.kv_len * in.v_depth;
  const float* q_row = in.q + row * in.depth;

  // Per thread, grown to the longest span seen (at most the cache's capacity).
  thread_local std::vector<float> scores;
  if (scores.size() < static_cast<size_t>(span.end - span.begin)) {
    scores.resize(static_cast<size_t>(span.end - span.begin));
  }
  float max_score = neg_inf;
  uint64_t read = 0;
  for (ssize_t s = span.begin; s < span.end; ++s) {
    const size_t m = static_cast<size_t>(s) * mask.stride[3];
    float score = neg_inf;  // excluded inside the span (e.g. a sliding window's hole)
    if ((allow == nullptr || allow[m]) && (bias == nullptr || bias[m] != neg_inf)) {
      score = Dot(q_row, k_head + s * in.depth, in.depth) * in.scale +
              (bias != nullptr ? bias[m] : 0.0f);
      ++read;
    }
    scores[s - span.begin] = score;
    max_score = std::max(max_score, score);
  }
  std::fill(acc, acc + in.v_depth, 0.0f);
  if (max_score == neg_inf) {
    return read;  // no position allowed: zeros, as PyTorch's SDPA gives for a fully masked row
  }
  float denominator = 0.0f;
  for (ssize_t s = span.begin; s < span.end; ++s) {
    const float score = scores[s - span.begin];
    if (score == neg_inf) {
      continue;
    }
    const float weight = std::exp(score - max_score);
    denominator += weight;
    const float* v_row = v_head + s * in.v_depth;
    for (ssize_t e = 0; e < in.v_depth; ++e) {
      acc[e] += weight * v_row[e];
    }
  }
  const float inverse = 1.0f / denominator;
  for (ssize_t e = 0; e < in.v_depth; ++e) {
    acc[e] *= inverse;
  }
  return read;
}

using AttendRowFn = uint64_t (*)(const AttentionInputs&, size_t, float*);

uint64_t AttendRowBaseline(const AttentionInputs& in, size_t row, float* acc) {
  return AttendRowBody(in, row, acc);
}

#if defined(__x86_64__)
// The same code compiled with AVX2 and FMA: eight floats per instruction where the baseline
// x86-64 build (SSE2) has four (//benchmarks:attention_step: 8-25% less time per step).
__attribute__((target("avx2,fma"))) uint64_t AttendRowAvx2(const AttentionInputs& in, size_t row,
                                                           float* acc) {
  return AttendRowBody(in, row, acc);
}
#endif

// The widest variant this CPU runs.
AttendRowFn ChooseAttendRow() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return AttendRowAvx2;
  }
#endif
  return AttendRowBaseline;
}
}  // namespace

Tensor& GqaAttentionOut(KernelRuntimeContext& ctx, const Tensor& query, const Tensor& key,
                        const Tensor& value, const std::optional<Tensor>& attn_mask, bool is_causal,
                        double scale, Tensor& out) {
  auto fail = [&]() -> Tensor& {
    ctx.fail(Error::InvalidArgument);
    return out;
  };
  if (!CheckTensor("query", query, 4) || !CheckTensor("key", key, 4) ||
      !CheckTensor("value", value, 4)) {
    return fail();
  }
  const ssize_t batch = query.size(0), q_heads = query.size(1), q_len = query.size(2),
                depth = query.size(3);
  const ssize_t kv_heads = key.size(1), kv_len = key.size(2), v_depth = value.size(3);
  if (key.size(0) != batch || key.size(3) != depth || value.size(0) != batch ||
      value.size(1) != kv_heads || value.size(2) != kv_len) {
    ET_LOG(Error,
           "gqa_attention: shapes do not agree: query [%zd, %zd, %zd, %zd], key [%zd, %zd, %zd, "
           "%zd], value [%zd, %zd, %zd, %zd]; expected query [B, H_q, T, E], key [B, H_kv, S, "
           "E], value [B, H_kv, S, E_v].",
           batch, q_heads, q_len, depth, static_cast<ssize_t>(key.size(0)), kv_heads, kv_len,
           static_cast<ssize_t>(key.size(3)), static_cast<ssize_t>(value.size(0)),
           static_cast<ssize_t>(value.size(1)), static_cast<ssize_t>(value.size(2)), v_depth);
    return fail();
  }
  if (kv_heads == 0 || q_heads % kv_heads != 0) {
    ET_LOG(Error, "gqa_attention: %zd query heads are not a multiple of %zd key/value heads.",
           q_heads, kv_heads);
    return fail();
  }
  MaskView mask;
  if (attn_mask.has_value()) {
    if (is_causal) {
      ET_LOG(Error, "gqa_attention: is_causal=true with an attn_mask (SDPA allows one).");
      return fail();
    }
    const ssize_t full[4] = {batch, q_heads, q_len, kv_len};
    if (!MakeMaskView(*attn_mask, full, &mask)) {
      return fail();
    }
  }
  if (out.scalar_type() != ScalarType::Float) {
    ET_LOG(Error, "gqa_attention: out must be float32, got %s.",
           executorch::runtime::toString(out.scalar_type()));
    return fail();
  }
  const executorch::aten::SizesType out_sizes[4] = {
      static_cast<executorch::aten::SizesType>(batch),
      static_cast<executorch::aten::SizesType>(q_heads),
      static_cast<executorch::aten::SizesType>(q_len),
      static_cast<executorch::aten::SizesType>(v_depth)};
  if (executorch::runtime::resize_tensor(out, {out_sizes, 4}) != Error::Ok ||
      !executorch::runtime::tensor_is_contiguous(out) ||
      (out.numel() > 0 && out.mutable_data_ptr() == nullptr)) {
    ET_LOG(Error,
           "gqa_attention: out cannot hold [%zd, %zd, %zd, %zd] contiguous float32; bind an "
           "output of that shape.",
           batch, q_heads, q_len, v_depth);
    return fail();
  }

  const AttentionInputs in{query.const_data_ptr<float>(),
                           key.const_data_ptr<float>(),
                           value.const_data_ptr<float>(),
                           mask,
                           static_cast<float>(scale),
                           is_causal,
                           q_heads,
                           q_len,
                           depth,
                           kv_heads,
                           kv_len,
                           v_depth};
  float* o = out.mutable_data_ptr<float>();
  // One task per output row (batch, head, query position): rows are independent and write
  // disjoint parts of `out`. ExecuTorch's threadpool is the one XNNPACK's delegates use.
  const int64_t rows = static_cast<int64_t>(batch * q_heads * q_len);
  static const AttendRowFn attend_row = ChooseAttendRow();  // once per process
  auto attend_rows = [&](int64_t begin, int64_t end) {
    PoolTakeOver(&pool_start);
    uint64_t read = 0;
    for (int64_t row = begin; row < end; ++row) {
      read += attend_row(in, static_cast<size_t>(row), o + static_cast<size_t>(row) * v_depth);
    }
    positions_read.Add(read);
    PoolHandOff(&pool_done);
  };
  PoolHandOff(&pool_start);  // after everything the tasks read was written
  const bool ok = executorch::extension::parallel_for(0, rows, /*grain_size=*/1, attend_rows);
  PoolTakeOver(&pool_done);
  if (!ok) {
    ET_LOG(Error, "gqa_attention: the threadpool refused the work (parallel_for failed).");
    return fail();
  }
  return out;
}

uint64_t GqaAttentionPositionsRead() { return positions_read.Read(); }

namespace {

// Registered at load time (RegisterKernelOnce keeps an existing registration).
const bool kRegistered = [] {
  static const executorch::runtime::Kernel kernel = executorch::extension::make_boxed_kernel(
      kGqaAttentionOutOpName, EXECUTORCH_FN(GqaAttentionOut, kGqaAttentionOutOpName));
  return RegisterKernelOnce(kernel);
}();

}  // namespace
}  // namespace executorch_trt

extern "C" __attribute__((visibility("default"))) uint64_t
executorch_trt_gqa_attention_positions_read(void) {
  return executorch_trt::GqaAttentionPositionsRead();
}
