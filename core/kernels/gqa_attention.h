// Copyright (c) executorch-trt authors.
//
// gqa_attention.h: ExecuTorch CPU kernel for
//
//   executorch_trt::gqa_attention.out(Tensor query, Tensor key, Tensor value, Tensor? attn_mask,
//                                     bool is_causal, float scale, *, Tensor(a!) out)
//       -> Tensor(a!)
//
// torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask,
// dropout_p=0, is_causal, scale=scale, enable_gqa=True), computed over the positions the mask
// allows only. The portable engine runs it in place of a transformers attention's
// repeat_kv + SDPA (py/executorch_trt/passes/gqa_attention.py): key and value are the caller's
// [B, H_kv, S, D] caches themselves, read in place, never repeated per query head, and a
// position the mask excludes (an unfilled cache row, a position outside a sliding window) is
// never read, so a decode step costs what the filled positions cost, not the capacity.
// Registered with the kernel registry by a static initializer in gqa_attention.cpp (link with
// alwayslink, or load libexecutorch_trt.so).

#pragma once

#include <cstdint>
#include <optional>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

namespace executorch_trt {

// The unboxed kernel.
//
// Inputs (float32, contiguous):
//   query [B, H_q, T, E]; key [B, H_kv, S, E]; value [B, H_kv, S, E_v]; H_q a multiple of
//   H_kv: query head h reads key/value head h / (H_q / H_kv) (repeat_kv's and SDPA
//   enable_gqa's grouping).
//   attn_mask (optional): bool (true = attend) or float32 (added to the scores), rank <= 4,
//   broadcastable to [B, H_q, T, S] (each of its last four sizes 1 or the full size; missing
//   leading sizes count as 1).
//   is_causal: query row t attends key positions s <= t (SDPA's top-left alignment); only
//   without attn_mask (SDPA rejects both).
//   scale: multiplies q.k (SDPA's default is 1/sqrt(E); the caller passes it explicitly).
// Output: out [B, H_q, T, E_v] float32 (resized if dynamic), contiguous.
//
// A key position is read only where the mask allows it: a false bool entry or a -inf float
// entry contributes exactly 0 in SDPA, so skipping it changes nothing. A row the mask allows
// nowhere gives zeros, as PyTorch's SDPA does. The query heads that share a key/value head are
// computed together, so each key and value row is read from memory once per group, not once
// per query head; an allowed span longer than 128 positions is cut into chunks of 128 computed
// in parallel, each with its own softmax maximum and sum, and combined by rescaling to the
// largest maximum (log-sum-exp), which gives the same softmax as one pass. Float32 throughout;
// scratch memory per call (the plan and the chunks' partial results) is on the heap.
//
// Errors: ctx.fail(Error::InvalidArgument) with an ET_LOG line naming the argument and the
// expected and actual value (dtype, rank, a size, a head count that does not divide, a mask
// that does not broadcast, is_causal with a mask, non-contiguous storage); nothing is written.
// Never reads or writes outside the tensors' storage. Thread-safety: re-entrant; concurrent
// calls must not share `out`.
executorch::aten::Tensor& GqaAttentionOut(executorch::runtime::KernelRuntimeContext& ctx,
                                          const executorch::aten::Tensor& query,
                                          const executorch::aten::Tensor& key,
                                          const executorch::aten::Tensor& value,
                                          const std::optional<executorch::aten::Tensor>& attn_mask,
                                          bool is_causal, double scale,
                                          executorch::aten::Tensor& out);

// How many (query row, key position) pairs gqa_attention.out has attended in this process
// (all programs, all threads; callers take deltas): a decode step at position p with a
// causal mask adds layers * H_q * (p + 1) whatever the cache's capacity. Tests read it to
// prove the kernel skips unfilled positions. Thread-safe.
uint64_t GqaAttentionPositionsRead();

// Which build of the kernel's inner loops this process runs: "avx2" (x86-64 CPUs with AVX2 and
// FMA) or "baseline" (any other CPU, e.g. Arm, or when the environment variable
// EXECUTORCH_TRT_GQA_ATTENTION_BUILD is "baseline", read once at the first call; another
// non-empty value is logged as an error and ignored). Both compute the same values up to float
// rounding; tests run each.
const char* GqaAttentionBuild();
inline constexpr const char kGqaAttentionBuildVariable[] = "EXECUTORCH_TRT_GQA_ATTENTION_BUILD";

// The fully qualified operator name the kernel is registered under.
inline constexpr const char kGqaAttentionOutOpName[] = "executorch_trt::gqa_attention.out";

}  // namespace executorch_trt

// C entry point for ctypes (Python): GqaAttentionPositionsRead().
extern "C" uint64_t executorch_trt_gqa_attention_positions_read(void);
