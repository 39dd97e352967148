"""A Hugging Face transformers Llama decoder through the delegate, against eager PyTorch.

Seeded random weights, 2 layers, grouped-query attention (4 query / 2 KV heads), static
cache of 64 positions (examples/decoder_model.py). Prefill and decode are exported together
(one program, shared KV cache) and run through `executorch_trt.runtime` for 8 greedy decode
steps. After every step: the token equals eager's, the logits are within float32 tolerance,
and every KV cache buffer (read back through a third method that returns the caches) equals
eager's cache. Runs in both kv_cache modes. Decode's attention runs on the delegate's
``gqa_attention`` kernel, which reads exactly the filled positions.
"""

import os

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
from decoder_model import build_model, cache_buffers, exportable_decoder
from executorch_trt import runtime

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MAX_SEQ_LEN = 64
PROMPT_LEN = 5
DECODE_STEPS = 8


class ReadCaches(torch.nn.Module):
    """`forward(x[1]) -> (x, *kv_caches)`: exported beside prefill/decode with the decoder's
    own buffer FQNs (`key_cache_{i}`, `value_cache_{i}`), so in the program it reads the very
    buffers prefill and decode update (shared mutable buffers)."""

    def __init__(self, decoder):
        super().__init__()
        self.names = list(cache_buffers(decoder))
        for name, buf in cache_buffers(decoder).items():
            self.register_buffer(name, buf, persistent=False)

    def forward(self, x):
        return (x + 0, *(getattr(self, n) + 0 for n in self.names))


@delegate_library.needs_library
class HuggingFaceLlamaTest(parameterized.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = build_model(MAX_SEQ_LEN)
        torch.manual_seed(3)
        cls.prompt = torch.randint(0, cls.model.config.vocab_size, (1, PROMPT_LEN))

    def _export(self, kv_cache):
        decoder = exportable_decoder(self.model, MAX_SEQ_LEN)
        with torch.no_grad():
            methods = {
                "prefill": torch.export.export(
                    decoder, (self.prompt, torch.arange(PROMPT_LEN)), strict=False
                ),
                "decode": torch.export.export(
                    decoder, (torch.tensor([[0]]), torch.tensor([PROMPT_LEN])), strict=False
                ),
                "read_caches": torch.export.export(
                    ReadCaches(decoder), (torch.ones(1),), strict=False
                ),
            }
            return executorch_trt.export(methods, kv_cache=kv_cache, emit_mutable_buffer_names=True)

    @parameterized.parameters("inplace", "copy_back")
    def test_greedy_decode_matches_eager_with_cache_after_every_step(self, kv_cache):
        manager = self._export(kv_cache)
        delegates = [
            d.id for plan in manager.executorch_program.execution_plan for d in plan.delegates
        ]
        self.assertIn("TensorRTBackend", delegates, "the program must actually use the delegate")
        # State ExecuTorch copies back per call, read off the plan: none in place; every cache
        # and step counter in copy_back (4 x 64 positions x 2 heads x 16 x 4 B + 2 x 8 B).
        report = executorch_trt.inspect(manager)
        for method in ("prefill", "decode"):
            self.assertEqual(
                report.method(method).state_bytes_copied_per_call,
                0 if kv_cache == "inplace" else 4 * 64 * 2 * 16 * 4 + 2 * 8,
                method,
            )
        program = runtime.load(manager.buffer)
        prefill, decode = program.load_method("prefill"), program.load_method("decode")
        read_caches = program.load_method("read_caches")

        eager = exportable_decoder(self.model, MAX_SEQ_LEN)
        names = list(cache_buffers(eager))
        with torch.no_grad():
            want = eager(self.prompt, torch.arange(PROMPT_LEN))
        copied_before = runtime.bytes_copied()
        got = prefill.execute([self.prompt, torch.arange(PROMPT_LEN)])[0]
        token = None
        for step in range(DECODE_STEPS + 1):
            where = f"step {step} ({kv_cache})"
            scale = max(1.0, want.abs().max().item())
            torch.testing.assert_close(
                got[:, -1], want[:, -1], atol=1e-4 * scale, rtol=0, msg=where
            )
            token = int(want[0, -1].argmax())
            self.assertEqual(int(got[0, -1].argmax()), token, where)
            caches = read_caches.execute([torch.ones(1)])[1:]
            self.assertLen(caches, len(names))
            for name, program_cache in zip(names, caches):
                eager_cache = getattr(eager, name)
                self.assertGreater(
                    eager_cache.abs().sum().item(), 0, f"{where}: {name} never written"
                )
                torch.testing.assert_close(
                    program_cache, eager_cache, atol=1e-5, rtol=1e-5, msg=f"{where}: {name}"
                )
            if step == DECODE_STEPS:
                break
            pos = torch.tensor([PROMPT_LEN + step])
            with torch.no_grad():
                want = eager(torch.tensor([[token]]), pos)
            read_before = runtime.gqa_attention_positions_read()
            got = decode.execute([torch.tensor([[token]]), pos])[0]
            # Every layer's every query head attends positions 0..pos and nothing beyond.
            config = self.model.config
            self.assertEqual(
                runtime.gqa_attention_positions_read() - read_before,
                config.num_hidden_layers * config.num_attention_heads * (PROMPT_LEN + step + 1),
                where,
            )
        # In place, the delegate copies no cache bytes (the aliased output is the buffer
        # itself). copy_back aliases nothing: the engine writes a separate output that
        # ExecuTorch copies back, so the delegate's own counter stays 0 there too.
        self.assertEqual(runtime.bytes_copied() - copied_before, 0)


if __name__ == "__main__":
    absltest.main()
