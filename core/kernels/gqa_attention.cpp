// Copyright (c) executorch-trt authors.

#include "core/kernels/gqa_attention.h"
#include "core/common/process_counter.h"
#include "core/common/runtime_types.h"
#include "core/kernels/register_once.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

// Dot and AttendChunkBody are inlined into each AttendChunk variant below, which compiles them
// for its instruction set and, for heads of 64, for that size (constant-length loops the
// compiler unrolls, sums it keeps in vector registers).
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

// Eight floats as one value (GCC/Clang vector extension): one AVX register in the AVX2
// variant, two SSE registers in the baseline one. Plain float arrays of the same job were kept
// on the stack by the compiler.
typedef float Float8 __attribute__((vector_size(32)));
// Passing and returning one changes the ABI between the variants (GCC's -Wpsabi); the helpers
// that do are inlined into each variant and internal to this file, so no call crosses it. Off
// for the rest of the file: GCC reports some of these where the file ends.
#pragma GCC diagnostic ignored "-Wpsabi"

GQA_INLINE Float8 Load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof(v));  // unaligned load
  return v;
}

GQA_INLINE float Sum8(Float8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

GQA_INLINE void Store8(float* p, Float8 v) { std::memcpy(p, &v, sizeof(v)); }

// Eight int32s, the comparison results and exponent bits of Exp8.
typedef int32_t Int8 __attribute__((vector_size(32)));

// e^x, eight at a time, for the kernel's x = score - row maximum (<= 0, or -inf, or NaN):
// Cephes' expf (n = round(x / ln 2), r = x - n ln 2 in two parts, a degree-6 polynomial in r,
// times 2^n built in the exponent bits), within ~2 ulp of e^x. Below -87.33, where e^x leaves
// float's normal range, it gives 0 (no weight: the value row is skipped); NaN stays NaN.
// std::exp one value at a time was ~14% of //benchmarks:attention_step.
GQA_INLINE Float8 Exp8(Float8 x) {
  const float kRound = 12582912.0f;  // 1.5 * 2^23: x + it rounds x to an integer (|x| < 2^22)
  const Float8 t = x * 1.44269504088896341f + kRound;
  const Float8 n = t - kRound;
  const Float8 r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 = 0.693359375 - 2.12e-4
  Float8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Float8 y = p * (r * r) + r + 1.0f;
  // Unsigned, so that the lanes masked below (x = -inf, NaN) wrap instead of overflowing.
  typedef uint32_t Bits8 __attribute__((vector_size(32)));
  Bits8 n_bits;
  Int8 y_bits;
  std::memcpy(&n_bits, &t, sizeof(t));
  // The low bits of t hold n; 2^n is n + 127 in the exponent field (n >= -126 above -87.33).
  const Bits8 pow2_bits = ((n_bits - 0x4B400000u) + 127u) << 23;
  Float8 pow2;
  std::memcpy(&pow2, &pow2_bits, sizeof(pow2));
  const Float8 scaled = y * pow2;
  std::memcpy(&y_bits, &scaled, sizeof(scaled));
  y_bits &= ~(x < -87.33f);  // all ones where true
  Float8 out;
  std::memcpy(&out, &y_bits, sizeof(out));
  return out;
}

// The weights of a row's scores in place, exp(score - max_score), and their sum; a score of -inf
// gets 0.
GQA_INLINE float ExpWeights(float* scores, ssize_t length, float max_score) {
  if (max_score == -std::numeric_limits<float>::infinity()) {
    std::fill(scores, scores + length, 0.0f);  // nothing allowed (and -inf - -inf is NaN)
    return 0.0f;
  }
  Float8 sums = {};
  ssize_t i = 0;
  for (; i + 8 <= length; i += 8) {
    const Float8 w = Exp8(Load8(scores + i) - max_score);
    Store8(scores + i, w);
    sums += w;
  }
  if (i < length) {  // the last few, padded with -inf (weight 0)
    float tail[8];
    std::fill(tail, tail + 8, -std::numeric_limits<float>::infinity());
    std::copy(scores + i, scores + length, tail);
    const Float8 w = Exp8(Load8(tail) - max_score);
    Store8(tail, w);
    std::copy(tail, tail + (length - i), scores + i);
    sums += w;
  }
  return Sum8(sums);
}

// a . b over kN floats (a multiple of 32) in four independent vector sums, not one chain of
// dependent multiply-adds.
template <int kN>
GQA_INLINE float DotFixed(const float* a, const float* b) {
  static_assert(kN % 32 == 0, "DotFixed takes multiples of 32");
  Float8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  for (int e = 0; e < kN; e += 32) {
    s0 += Load8(a + e) * Load8(b + e);
    s1 += Load8(a + e + 8) * Load8(b + e + 8);
    s2 += Load8(a + e + 16) * Load8(b + e + 16);
    s3 += Load8(a + e + 24) * Load8(b + e + 24);
  }
  return Sum8((s0 + s1) + (s2 + s3));
}

// Pairwise sums of x's and y's neighbours, as x86's haddps (__builtin_shufflevector: Clang, GCC >=
// 12): [x0+x1, x2+x3, y0+y1, y2+y3] in each half of eight.
GQA_INLINE Float8 PairSums(Float8 x, Float8 y) {
  return __builtin_shufflevector(x, y, 0, 2, 8, 10, 4, 6, 12, 14) +
         __builtin_shufflevector(x, y, 1, 3, 9, 11, 5, 7, 13, 15);
}

// q . k_r for the eight rows k_r = k_rows + r * kN (kN floats each, a multiple of 8), as one
// Float8 (lane r). The eight sums are reduced together, three rounds of pairwise sums and one of
// halves, where reducing each alone costs about as much again as its multiply-adds.
template <int kN>
GQA_INLINE Float8 DotEightRows(const float* q, const float* k_rows) {
  static_assert(kN % 8 == 0, "DotEightRows takes multiples of 8");
  Float8 a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {};
  for (int e = 0; e < kN; e += 8) {
    const Float8 qe = Load8(q + e);
    a0 += qe * Load8(k_rows + e);
    a1 += qe * Load8(k_rows + kN + e);
    a2 += qe * Load8(k_rows + 2 * kN + e);
    a3 += qe * Load8(k_rows + 3 * kN + e);
    a4 += qe * Load8(k_rows + 4 * kN + e);
    a5 += qe * Load8(k_rows + 5 * kN + e);
    a6 += qe * Load8(k_rows + 6 * kN + e);
    a7 += qe * Load8(k_rows + 7 * kN + e);
  }
  // Lanes [r0..r3 of the low halves, r0..r3 of the high halves] for rows 0-3, likewise 4-7.
  const Float8 low = PairSums(PairSums(a0, a1), PairSums(a2, a3));
  const Float8 high = PairSums(PairSums(a4, a5), PairSums(a6, a7));
  return __builtin_shufflevector(low, high, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(low, high, 4, 5, 6, 7, 12, 13, 14, 15);
}

// The unit of work: the query heads that share one key/value head (a group), at one query
// position, over a chunk [begin, end) of key positions. Each key and value row of the chunk is
// read once for the whole group (GQA's point), and long spans are cut into chunks so that a
// decode step (one query position, few groups) still gives every thread work.
struct Chunk {
  size_t first_row;      // output row of the group's first head; head g's row is + g * q_len
  const KeySpan* spans;  // the group's rows' allowed spans, one per head
  ssize_t kv;            // flattened [B, H_kv] index of the key/value head
  ssize_t begin, end;    // key positions of this chunk
};

// Where a chunk's result goes, per head g of the group: acc[g] receives v_depth floats. With
// `partial`, acc[g] is the unnormalised sum of exp(score - max) * v and max[g] / sum[g] the
// chunk's running maximum and sum of weights (combined across chunks later); without it,
// acc[g] is the finished output row.
struct ChunkResult {
  float* const* acc;
  float* max;
  float* sum;
  bool partial;
};

// kD > 0: query, key and value rows are all kD floats (the caller checked); 0: any sizes.
template <int kD>
GQA_INLINE uint64_t AttendChunkBody(const AttentionInputs& in, const Chunk& c,
                                    const ChunkResult& result) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const ssize_t depth = kD > 0 ? kD : in.depth;
  const ssize_t v_depth = kD > 0 ? kD : in.v_depth;
  const ssize_t group = in.q_heads / in.kv_heads;
  const ssize_t length = c.end - c.begin;
  const MaskView& mask = in.mask;
  const float* k_head = in.k + static_cast<size_t>(c.kv) * in.kv_len * depth;
  const float* v_head = in.v + static_cast<size_t>(c.kv) * in.kv_len * v_depth;

  // Per thread, grown to the largest group * chunk seen.
  thread_local std::vector<float> scores;
  if (scores.size() < static_cast<size_t>(group * length)) {
    scores.resize(static_cast<size_t>(group * length));
  }
  uint64_t read = 0;
  for (ssize_t g = 0; g < group; ++g) {
    const size_t row = c.first_row + static_cast<size_t>(g * in.q_len);
    const ssize_t t = static_cast<ssize_t>(row % in.q_len);
    const ssize_t h = static_cast<ssize_t>((row / in.q_len) % in.q_heads);
    const ssize_t b = static_cast<ssize_t>(row / (in.q_len * in.q_heads));
    const size_t mask_row = b * mask.stride[0] + h * mask.stride[1] + t * mask.stride[2];
    const bool* allow = mask.bools != nullptr ? mask.bools + mask_row : nullptr;
    const float* bias = mask.floats != nullptr ? mask.floats + mask_row : nullptr;
    // The row's span within the chunk, empty (begin == end) where they do not meet.
    const ssize_t begin = std::clamp(c.spans[g].begin, c.begin, c.end);
    const ssize_t end = std::clamp(c.spans[g].end, begin, c.end);
    const float* q_row = in.q + row * depth;
    float* head_scores = scores.data() + g * length;  // [s - c.begin] for key position s
    auto allowed = [&](ssize_t s) {
      const size_t m = static_cast<size_t>(s) * mask.stride[3];
      return (allow == nullptr || allow[m]) && (bias == nullptr || bias[m] != neg_inf);
    };
    auto add_bias = [&](ssize_t s, float score) {
      return bias != nullptr ? score + bias[static_cast<size_t>(s) * mask.stride[3]] : score;
    };
    float max_score = neg_inf;
    // The group's heads read the same key rows one after the other: from memory once.
    auto score_one = [&](ssize_t s) {
      float score = neg_inf;  // excluded inside the span (a hole)
      if (allowed(s)) {
        const float* k_row = k_head + s * depth;
        float dot;
        if constexpr (kD > 0) {
          dot = DotFixed<kD>(q_row, k_row);
        } else {
          dot = Dot(q_row, k_row, depth);
        }
        score = add_bias(s, dot * in.scale);
        ++read;
      }
      head_scores[s - c.begin] = score;
      max_score = std::max(max_score, score);
    };
    std::fill(head_scores, head_scores + (begin - c.begin), neg_inf);  // outside the row's span
    ssize_t s = begin;
    if constexpr (kD > 0) {
      // Eight positions at a time; a block with a hole, position by position.
      Float8 block_max = Float8{} + neg_inf;
      for (; s + 8 <= end; s += 8) {
        bool all_allowed = true;
        for (ssize_t i = s; i < s + 8; ++i) {
          all_allowed = all_allowed && allowed(i);
        }
        if (!all_allowed) {
          for (ssize_t i = s; i < s + 8; ++i) {
            score_one(i);
          }
          continue;
        }
        Float8 block = DotEightRows<kD>(q_row, k_head + s * kD) * in.scale;
        if (bias != nullptr) {
          for (int i = 0; i < 8; ++i) {
            block[i] = add_bias(s + i, block[i]);
          }
        }
        Store8(head_scores + (s - c.begin), block);
        block_max = block_max > block ? block_max : block;
        read += 8;
      }
      for (int i = 0; i < 8; ++i) {
        max_score = std::max(max_score, block_max[i]);
      }
    }
    for (; s < end; ++s) {  // any head size, and the last few positions
      score_one(s);
    }
    std::fill(head_scores + (end - c.begin), head_scores + length, neg_inf);
    result.max[g] = max_score;
  }
  // Head by head, so that a head's sums stay in registers (kD) while the chunk's value rows,
  // read by the first head, come from the CPU's cache for the others. The weights first, in a
  // loop of their own: a call of exp inside the sum would make the compiler spill the sums.
  for (ssize_t g = 0; g < group; ++g) {
    float* weights = scores.data() + g * length;
    const float sum = ExpWeights(weights, length, result.max[g]);
    float* acc = result.acc[g];
    // A zero weight (a position not allowed, or one whose weight underflowed) adds nothing: its
    // value row is not read.
    if constexpr (kD > 0) {
      static_assert(kD % 8 == 0, "heads of whole Float8s");
      Float8 local[kD / 8] = {};
      for (ssize_t s = c.begin; s < c.end; ++s) {
        const float weight = weights[s - c.begin];
        if (weight == 0.0f) {
          continue;
        }
        const float* v_row = v_head + s * kD;
#pragma GCC unroll 16
        for (int j = 0; j < kD / 8; ++j) {
          local[j] += weight * Load8(v_row + 8 * j);
        }
      }
      std::memcpy(acc, local, sizeof(local));
    } else {
      std::fill(acc, acc + v_depth, 0.0f);
      for (ssize_t s = c.begin; s < c.end; ++s) {
        const float weight = weights[s - c.begin];
        if (weight == 0.0f) {
          continue;
        }
        const float* v_row = v_head + s * v_depth;
        for (ssize_t e = 0; e < v_depth; ++e) {
          acc[e] += weight * v_row[e];
        }
      }
    }
    result.sum[g] = sum;
  }
  if (!result.partial) {
    for (ssize_t g = 0; g < group; ++g) {
      // A row allowed nowhere keeps its zeros, as PyTorch's SDPA gives for it.
      if (result.max[g] != neg_inf) {
        const float inverse = 1.0f / result.sum[g];
        for (ssize_t e = 0; e < v_depth; ++e) {
          result.acc[g][e] *= inverse;
        }
      }
    }
  }
  return read;
}

using AttendChunkFn = uint64_t (*)(const AttentionInputs&, const Chunk&, const ChunkResult&);

template <int kD>
uint64_t AttendChunkBaseline(const AttentionInputs& in, const Chunk& c, const ChunkResult& r) {
  return AttendChunkBody<kD>(in, c, r);
}

#if defined(__x86_64__)
// The same code compiled with AVX2 and FMA: eight floats per instruction where the baseline
// x86-64 build (SSE2) has four (//benchmarks:attention_step: 8-25% less time per step).
template <int kD>
__attribute__((target("avx2,fma"))) uint64_t AttendChunkAvx2(const AttentionInputs& in,
                                                             const Chunk& c, const ChunkResult& r) {
  return AttendChunkBody<kD>(in, c, r);
}
#endif

// The variants for any head size and for heads of 64 (Llama-family models' usual size).
struct AttendChunkFns {
  AttendChunkFn any_depth;
  AttendChunkFn depth_64;
  const char* build;  // GqaAttentionBuild()
};

// The widest variants this CPU runs, unless kGqaAttentionBuildVariable asks for the baseline.
AttendChunkFns ChooseAttendChunk() {
  const AttendChunkFns baseline{AttendChunkBaseline<0>, AttendChunkBaseline<64>, "baseline"};
  const char* asked = std::getenv(kGqaAttentionBuildVariable);
  if (asked != nullptr && std::strcmp(asked, "baseline") == 0) {
    return baseline;
  }
  if (asked != nullptr && asked[0] != '\0') {
    ET_LOG(Error,
           "gqa_attention: %s=%s is not a build; use \"baseline\" or leave it unset (the "
           "widest this CPU runs is used).",
           kGqaAttentionBuildVariable, asked);
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {AttendChunkAvx2<0>, AttendChunkAvx2<64>, "avx2"};
  }
#endif
  return baseline;
}

// Chosen once per process, at the first call (or GqaAttentionBuild()).
const AttendChunkFns& AttendChunkVariants() {
  static const AttendChunkFns variants = ChooseAttendChunk();
  return variants;
}

// Key positions per chunk: enough to amortise a chunk's setup and combine, few enough that a
// decode step over a few hundred positions gives two threads several chunks each
// (//benchmarks:attention_step: 64, 256, and chunks shrunk for short spans were not faster).
constexpr ssize_t kChunkPositions = 128;

// A chunk's partial result, per head: v_depth sums, then its maximum and its sum of weights.
ssize_t PartialFloats(const AttentionInputs& in) { return in.v_depth + 2; }

// Output row `row` from its `chunks` partial results (each PartialFloats apart in `partials`,
// head `g` of its group): the chunks' sums rescaled to the largest maximum (log-sum-exp), so
// the row equals one softmax over all its positions.
void CombineRow(const AttentionInputs& in, const float* partials, ssize_t chunks, ssize_t group,
                ssize_t g, float* out_row) {
  const ssize_t stride = group * PartialFloats(in);
  const float* first = partials + g * PartialFloats(in);
  float best = -std::numeric_limits<float>::infinity();
  for (ssize_t c = 0; c < chunks; ++c) {
    best = std::max(best, first[c * stride + in.v_depth]);
  }
  std::fill(out_row, out_row + in.v_depth, 0.0f);
  if (best == -std::numeric_limits<float>::infinity()) {
    return;  // allowed nowhere: zeros
  }
  float denominator = 0.0f;
  for (ssize_t c = 0; c < chunks; ++c) {
    const float* p = first + c * stride;
    const float rescale = std::exp(p[in.v_depth] - best);  // 0 for a chunk with nothing allowed
    denominator += p[in.v_depth + 1] * rescale;
    for (ssize_t e = 0; e < in.v_depth; ++e) {
      out_row[e] += p[e] * rescale;
    }
  }
  const float inverse = 1.0f / denominator;
  for (ssize_t e = 0; e < in.v_depth; ++e) {
    out_row[e] *= inverse;
  }
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
  const ssize_t group = q_heads / kv_heads;

  // The plan, per group row (batch, key/value head, query position): its heads' allowed spans,
  // the union of those cut into chunks, and where its chunks' partial results go when it has
  // more than one.
  struct GroupRowPlan {
    size_t first_row;
    ssize_t kv, begin, end, chunks;
    ssize_t first_partial;  // index of its first chunk among the partial results, or -1
  };
  const size_t group_rows = static_cast<size_t>(batch * kv_heads * q_len);
  std::vector<GroupRowPlan> plans(group_rows);
  std::vector<KeySpan> spans(group_rows * static_cast<size_t>(group));
  std::vector<int64_t> chunk_starts(group_rows + 1, 0);  // first chunk of each group row
  ssize_t partial_chunks = 0;
  for (size_t gr = 0; gr < group_rows; ++gr) {
    const ssize_t t = static_cast<ssize_t>(gr % q_len);
    const ssize_t kv_head = static_cast<ssize_t>((gr / q_len) % kv_heads);
    const ssize_t b = static_cast<ssize_t>(gr / (q_len * kv_heads));
    GroupRowPlan& plan = plans[gr];
    plan.first_row = static_cast<size_t>((b * q_heads + kv_head * group) * q_len + t);
    plan.kv = b * kv_heads + kv_head;
    plan.begin = kv_len;
    plan.end = 0;
    for (ssize_t g = 0; g < group; ++g) {
      const ssize_t h = kv_head * group + g;
      const size_t mask_row = b * mask.stride[0] + h * mask.stride[1] + t * mask.stride[2];
      // A mask without a head dimension (the usual one) gives every head the first one's span.
      const KeySpan span =
          g > 0 && mask.stride[1] == 0
              ? spans[gr * group]
              : AllowedSpan(mask, mask_row, is_causal ? std::min(kv_len, t + 1) : kv_len);
      spans[gr * group + g] = span;
      if (span.begin < span.end) {
        plan.begin = std::min(plan.begin, span.begin);
        plan.end = std::max(plan.end, span.end);
      }
    }
    if (plan.begin >= plan.end) {
      plan.begin = plan.end = 0;  // nothing allowed: one empty chunk writes the zeros
    }
    plan.chunks =
        std::max<ssize_t>(1, (plan.end - plan.begin + kChunkPositions - 1) / kChunkPositions);
    plan.first_partial = plan.chunks > 1 ? partial_chunks : -1;
    if (plan.chunks > 1) {
      partial_chunks += plan.chunks;
    }
    chunk_starts[gr + 1] = chunk_starts[gr] + plan.chunks;
  }
  const ssize_t partial_floats = PartialFloats(in);
  std::vector<float> partials(static_cast<size_t>(partial_chunks * group * partial_floats));

  // One task per chunk: chunks write disjoint output rows or partial results. ExecuTorch's
  // threadpool is the one XNNPACK's delegates use.
  const AttendChunkFns& variants = AttendChunkVariants();
  const AttendChunkFn attend_chunk =
      depth == 64 && v_depth == 64 ? variants.depth_64 : variants.any_depth;
  auto attend_chunks = [&](int64_t begin, int64_t end) {
    PoolTakeOver(&pool_start);
    thread_local std::vector<float*> acc;
    thread_local std::vector<float> maxima, sums;
    acc.resize(static_cast<size_t>(group));
    maxima.resize(static_cast<size_t>(group));
    sums.resize(static_cast<size_t>(group));
    uint64_t read = 0;
    for (int64_t task = begin; task < end; ++task) {
      const size_t gr =
          static_cast<size_t>(std::upper_bound(chunk_starts.begin(), chunk_starts.end(), task) -
                              chunk_starts.begin() - 1);
      const GroupRowPlan& plan = plans[gr];
      const ssize_t c = static_cast<ssize_t>(task - chunk_starts[gr]);
      const ssize_t chunk_begin = plan.begin + c * kChunkPositions;
      const Chunk chunk{plan.first_row, &spans[gr * group], plan.kv, chunk_begin,
                        std::min(plan.end, chunk_begin + kChunkPositions)};
      float* slot = plan.chunks > 1
                        ? partials.data() + (plan.first_partial + c) * group * partial_floats
                        : nullptr;
      for (ssize_t g = 0; g < group; ++g) {
        acc[g] = slot != nullptr ? slot + g * partial_floats
                                 : o + (plan.first_row + g * q_len) * v_depth;
      }
      read += attend_chunk(in, chunk, {acc.data(), maxima.data(), sums.data(), slot != nullptr});
      if (slot != nullptr) {
        for (ssize_t g = 0; g < group; ++g) {
          slot[g * partial_floats + v_depth] = maxima[g];
          slot[g * partial_floats + v_depth + 1] = sums[g];
        }
      }
    }
    positions_read.Add(read);
    PoolHandOff(&pool_done);
  };
  // Group rows cut into several chunks: their heads' output rows from the chunks' results.
  auto combine_rows = [&](int64_t begin, int64_t end) {
    PoolTakeOver(&pool_start);
    for (int64_t gr = begin; gr < end; ++gr) {
      const GroupRowPlan& plan = plans[gr];
      if (plan.chunks > 1) {
        for (ssize_t g = 0; g < group; ++g) {
          CombineRow(in, partials.data() + plan.first_partial * group * partial_floats, plan.chunks,
                     group, g, o + (plan.first_row + g * q_len) * v_depth);
        }
      }
    }
    PoolHandOff(&pool_done);
  };
  PoolHandOff(&pool_start);  // after everything the tasks read was written
  bool ok =
      executorch::extension::parallel_for(0, chunk_starts.back(), /*grain_size=*/1, attend_chunks);
  PoolTakeOver(&pool_done);
  if (ok && partial_chunks > 0) {
    PoolHandOff(&pool_start);
    ok = executorch::extension::parallel_for(0, static_cast<int64_t>(group_rows),
                                             /*grain_size=*/1, combine_rows);
    PoolTakeOver(&pool_done);
  }
  if (!ok) {
    ET_LOG(Error, "gqa_attention: the threadpool refused the work (parallel_for failed).");
    return fail();
  }
  return out;
}

uint64_t GqaAttentionPositionsRead() { return positions_read.Read(); }

const char* GqaAttentionBuild() { return AttendChunkVariants().build; }

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
