"""SDPA decode attention on the delegate's ``gqa_attention`` kernel.

Small attention modules with ``[1, H_kv, S, D]`` cache buffers written with ``index_copy_``,
exported as decode steps (one new token) through ``executorch_trt.export`` and run through the
runtime for several steps, each against eager PyTorch (output and caches). What is checked:

* the forms the pass rewrites (``repeat_kv`` + SDPA as ``transformers`` writes it, SDPA with
  ``enable_gqa=True``, one KV head per query head) give eager's numbers;
* the kernel reads only what the mask allows: the positions-read counter grows by
  ``H_q * filled`` per step under a causal mask and by ``H_q * window`` under a sliding window,
  whatever the capacity;
* transformers' Llama (examples/decoder_model.py) attends on the kernel in prefill (several
  query rows, whose exported SDPA result is laid out by the CPU flash kernel:
  ``passes.sdpa_layout``) and in decode, reading exactly the causal positions, and matches
  eager;
* what the kernel cannot run (float64) is left to the decomposition and still matches eager;
* the op's eager/fake implementation rejects what the kernel rejects.
"""

import warnings

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
from executorch_trt.ops import gqa_attention as attention_ops

HEAD_DIM = 8


class CachedAttention(torch.nn.Module):
    """One decode step of attention over a static cache.

    ``forward(x[1, 1, H_q * D], pos[1] int64) -> [1, 1, H_q * D]``: projects q/k/v, writes k/v
    at ``pos`` with ``index_copy_``, attends over the cache with a bool mask (``mask``:
    ``"causal"`` = positions ``<= pos``, ``"window"`` = the last ``window`` of them) or a float
    mask (``"float"``, 0 / -inf), in one of three forms: ``"repeat_kv"`` (transformers),
    ``"enable_gqa"`` (SDPA groups the heads) or ``"mha"`` (``H_q == H_kv``)."""

    def __init__(
        self,
        capacity,
        q_heads=4,
        kv_heads=2,
        form="repeat_kv",
        mask="causal",
        window=3,
        dtype=torch.float32,
    ):
        super().__init__()
        torch.manual_seed(0)
        self.q_heads, self.kv_heads, self.form, self.mask, self.window = (
            q_heads,
            kv_heads,
            form,
            mask,
            window,
        )
        hidden = q_heads * HEAD_DIM
        self.q = torch.nn.Linear(hidden, hidden, bias=False, dtype=dtype)
        self.k = torch.nn.Linear(hidden, kv_heads * HEAD_DIM, bias=False, dtype=dtype)
        self.v = torch.nn.Linear(hidden, kv_heads * HEAD_DIM, bias=False, dtype=dtype)
        shape = (1, kv_heads, capacity, HEAD_DIM)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("positions", torch.arange(capacity), persistent=False)

    def forward(self, x, pos):
        q = self.q(x).view(1, 1, self.q_heads, HEAD_DIM).transpose(1, 2)
        k = self.k(x).view(1, 1, self.kv_heads, HEAD_DIM).transpose(1, 2)
        v = self.v(x).view(1, 1, self.kv_heads, HEAD_DIM).transpose(1, 2)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        keys, values = self.k_cache, self.v_cache
        allowed = self.positions.view(1, 1, 1, -1) <= pos.view(1, 1, 1, 1)
        if self.mask == "window":
            allowed = allowed & (
                self.positions.view(1, 1, 1, -1) > pos.view(1, 1, 1, 1) - self.window
            )
        mask = allowed
        if self.mask == "float":
            mask = torch.where(allowed, 0.0, float("-inf")).to(x.dtype)
        gqa = False
        if self.form == "repeat_kv":
            group = self.q_heads // self.kv_heads
            keys = (
                keys[:, :, None]
                .expand(1, self.kv_heads, group, *keys.shape[2:])
                .reshape(1, self.q_heads, *keys.shape[2:])
            )
            values = (
                values[:, :, None]
                .expand(1, self.kv_heads, group, *values.shape[2:])
                .reshape(1, self.q_heads, *values.shape[2:])
            )
        elif self.form == "enable_gqa":
            gqa = True
        out = torch.nn.functional.scaled_dot_product_attention(
            q, keys, values, attn_mask=mask, enable_gqa=gqa
        )
        return out.transpose(1, 2).reshape(1, 1, -1)


def _run_steps(test, model, steps):
    """Exports ``model``'s decode step, runs ``steps`` positions through the delegate and
    eagerly, checks output and caches each step; returns the kernel's positions read per
    step."""
    from executorch_trt import runtime

    hidden = model.q_heads * HEAD_DIM
    torch.manual_seed(1)
    xs = [torch.randn(1, 1, hidden, dtype=model.k_cache.dtype) for _ in range(steps)]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(model, (xs[0], torch.tensor([0])))
        program = executorch_trt.export(ep, require_inplace=True)
    loaded = runtime.load(program.buffer)
    method = loaded.load_method("forward")
    reads = []
    for step, x in enumerate(xs):
        pos = torch.tensor([step])
        with torch.no_grad():
            want = model(x, pos)
        before = runtime.gqa_attention_positions_read()
        got = method.execute([x, pos])[0]
        reads.append(runtime.gqa_attention_positions_read() - before)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=f"step {step}")
        for name in ("k_cache", "v_cache"):
            torch.testing.assert_close(
                loaded.buffer(name),
                getattr(model, name),
                atol=1e-6,
                rtol=1e-5,
                msg=f"step {step}: {name}",
            )
    return reads


@delegate_library.needs_library
class TransformersPrefillTest(absltest.TestCase):
    def test_prefill_and_decode_attend_on_the_kernel(self):
        from decoder_model import build_model, exportable_decoder
        from executorch_trt import runtime
        from executorch_trt.passes.sdpa_layout import SDPA_OP, is_layout_pinned

        max_seq, prompt = 32, torch.tensor([[5, 9, 1, 3]])
        module = exportable_decoder(build_model(max_seq), max_seq)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            methods = {
                "prefill": torch.export.export(module, (prompt, torch.arange(4)), strict=False),
                "decode": torch.export.export(
                    module, (torch.tensor([[7]]), torch.tensor([4])), strict=False
                ),
            }
            sdpa = [n for n in methods["prefill"].graph.nodes if n.target is SDPA_OP]
            self.assertLen(sdpa, 2)  # the flash kernel's layout: not contiguous
            self.assertFalse(any(n.meta["val"].is_contiguous() for n in sdpa))
            program = executorch_trt.export(methods, require_inplace=True)
        self.assertTrue(all(is_layout_pinned(n) for n in sdpa))
        loaded = runtime.load(program.buffer)
        prefill, decode = loaded.load_method("prefill"), loaded.load_method("decode")
        eager = exportable_decoder(build_model(max_seq), max_seq)  # same seed, fresh caches
        layers, heads = 2, 4
        for method, ids, pos, attended in (
            (prefill, prompt, torch.arange(4), 1 + 2 + 3 + 4),  # causal over 4 new rows
            (decode, torch.tensor([[7]]), torch.tensor([4]), 5),
        ):
            before = runtime.gqa_attention_positions_read()
            got = method.execute([ids, pos])[0]
            self.assertEqual(
                runtime.gqa_attention_positions_read() - before, layers * heads * attended
            )
            with torch.no_grad():
                want = eager(ids, pos)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@delegate_library.needs_library
class GqaAttentionDelegateTest(parameterized.TestCase):
    @parameterized.parameters("repeat_kv", "enable_gqa", "mha")
    def test_forms_match_eager_and_read_only_filled_positions(self, form):
        kv_heads = 4 if form == "mha" else 2
        reads = _run_steps(self, CachedAttention(24, kv_heads=kv_heads, form=form), steps=5)
        self.assertEqual(reads, [4 * (p + 1) for p in range(5)])

    def test_cost_follows_filled_positions_not_capacity(self):
        small = _run_steps(self, CachedAttention(16), steps=4)
        large = _run_steps(self, CachedAttention(512), steps=4)
        self.assertEqual(small, large)
        self.assertEqual(small, [4, 8, 12, 16])

    def test_sliding_window_reads_only_the_window(self):
        reads = _run_steps(self, CachedAttention(20, mask="window", window=3), steps=7)
        self.assertEqual(reads, [4 * min(p + 1, 3) for p in range(7)])

    def test_float_mask(self):
        reads = _run_steps(self, CachedAttention(12, mask="float"), steps=4)
        self.assertEqual(reads, [4, 8, 12, 16])

    def test_float64_is_left_to_the_decomposition(self):
        reads = _run_steps(self, CachedAttention(12, dtype=torch.float64), steps=3)
        self.assertEqual(reads, [0, 0, 0], "the kernel takes float32 only")

    def test_attention_result_is_the_method_result(self):
        # The method returns the SDPA node itself, which the pass replaces.
        from executorch_trt import runtime

        class ReturnsAttention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.register_buffer("k_cache", torch.randn(1, 2, 6, HEAD_DIM))
                self.register_buffer("v_cache", torch.randn(1, 2, 6, HEAD_DIM))

            def forward(self, q, mask):
                def repeat(x):
                    return x[:, :, None].expand(1, 2, 2, 6, HEAD_DIM).reshape(1, 4, 6, HEAD_DIM)

                return torch.nn.functional.scaled_dot_product_attention(
                    q, repeat(self.k_cache), repeat(self.v_cache), attn_mask=mask
                )

        model = ReturnsAttention()
        q = torch.randn(1, 4, 1, HEAD_DIM)
        mask = torch.tensor([True, True, True, False, False, False]).view(1, 1, 1, 6)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = executorch_trt.export(torch.export.export(model, (q, mask)))
            want = model(q, mask)
        method = runtime.load(program.buffer).load_method("forward")
        before = runtime.gqa_attention_positions_read()
        got = method.execute([q, mask])[0]
        self.assertEqual(runtime.gqa_attention_positions_read() - before, 4 * 3)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


class GqaAttentionOpTest(absltest.TestCase):
    def test_eager_op_is_sdpa_with_grouped_heads(self):
        torch.manual_seed(0)
        q, k, v = torch.randn(1, 6, 2, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 3)
        mask = torch.rand(1, 1, 2, 5) > 0.3
        got = attention_ops.gqa_attention(q, k, v, mask, False, 0.7)
        group = 3
        want = torch.nn.functional.scaled_dot_product_attention(
            q,
            k.repeat_interleave(group, 1),
            v.repeat_interleave(group, 1),
            attn_mask=mask,
            scale=0.7,
        )
        torch.testing.assert_close(got, want)

    def test_rejections_name_the_argument(self):
        q, k, v = torch.randn(1, 4, 1, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
        cases = {
            "query is 4-D torch.float64": (q.double(), k, v, None, False),
            "not a multiple": (q, torch.randn(1, 3, 6, 8), torch.randn(1, 3, 6, 8), None, False),
            "does not broadcast": (q, k, v, torch.ones(1, 1, 1, 5, dtype=torch.bool), False),
            "is_causal with an attn_mask": (
                q,
                k,
                v,
                torch.ones(1, 1, 1, 6, dtype=torch.bool),
                True,
            ),
            "attn_mask is 4-D torch.int32": (
                q,
                k,
                v,
                torch.ones(1, 1, 1, 6, dtype=torch.int32),
                False,
            ),
        }
        for expected, args in cases.items():
            with self.assertRaisesRegex(ValueError, expected):
                attention_ops.gqa_attention(*args, 0.5)


if __name__ == "__main__":
    absltest.main()
