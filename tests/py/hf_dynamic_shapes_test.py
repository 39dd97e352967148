"""Dynamic shapes on `transformers` models nobody here wrote, through the delegate.

* Llama with transformers' ``StaticCache`` (``TorchExportableModuleForDecoderOnlyLM``), ``prefill``
  exported with a dynamic length (``Dim("T", min=1, max=MAX_CACHE_LEN - 1)``, the pattern of
  pytorch/pytorch#152465; ``strict=True``, as ``run_decompositions`` fails on the non-strict
  export of this wrapper under torch 2.13 with plain ExecuTorch too), ``decode`` static. Prompts
  of several lengths on one loaded program, then decode steps, and a chunked prefill.
* T5 through transformers' own ``Seq2SeqLMExportableModule.export()`` (its encoder and decoder
  take a dynamic encoder length, ``Dim(max=max_hidden_seq_length)``), unchanged.

Reference: eager transformers on the same weights (fresh wrappers, zeroed caches). Logits must
agree within 1e-4 of their scale; the delegate copies no state (``runtime.bytes_copied``).
"""

import copy

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
import hf_models as H
from executorch_trt import runtime


def _assert_close(test, got, want, context):
    test.assertEqual(tuple(got.shape), tuple(want.shape), context)
    scale = max(1.0, float(want.abs().max()))
    diff = float((got - want).abs().max())
    test.assertLessEqual(diff, 1e-4 * scale, f"{context}: max abs diff {diff} (scale {scale})")


@delegate_library.needs_library
class LlamaSingleForwardTest(parameterized.TestCase):
    """ExecuTorch's LLM convention: one ``forward(tokens[1, T], input_pos[T])`` with
    ``Dim("T", min=1, ...)`` for the prompt and every decode step (T = 1), through
    ``executorch_trt.export`` and through the composable path. ExecuTorch recomputes an edge
    program's ranges from the shape environment ([2, max]); the partitioner must still give
    the delegate the declared [1, max], or every decode step is refused."""

    @classmethod
    def setUpClass(cls):
        from executorch.exir import to_edge_transform_and_lower

        from executorch_trt.llm.decoder_programs import export_decoder_methods
        from executorch_trt.lowering.partitioner import TensorRTPartitioner

        cls.model = H.FAMILIES["llama"].model()

        def export():
            # transformers' wrapper, Dim("T", min=1, max=MAX_CACHE_LEN - 1), strict=True;
            # every token's logits, so the output's T is dynamic too.
            return export_decoder_methods(
                cls.model, H.MAX_CACHE_LEN - 1, H.MAX_CACHE_LEN, generate_full_logits=True
            )["forward"]

        with torch.no_grad():
            cls.programs = {
                "executorch_trt.export": executorch_trt.export(export()),
                "composable": to_edge_transform_and_lower(
                    export(), partitioner=[TensorRTPartitioner()]
                ).to_executorch(executorch_trt.backend_config()),
            }
        torch.manual_seed(6)
        cls.tokens = torch.randint(3, H.VOCAB, (1, H.MAX_CACHE_LEN))

    @parameterized.product(
        path=["executorch_trt.export", "composable"], prompt=[1, H.PROMPT_LEN, H.MAX_CACHE_LEN - 3]
    )
    def test_prompt_then_decode_steps_on_one_method(self, path, prompt):
        program = runtime.load(self.programs[path].buffer)
        method = program.load_method("forward")
        eager = H.DecoderOnlyEager(self.model)
        ids, start = self.tokens[:, :prompt], 0
        for k in range(3):
            pos = torch.arange(start, start + ids.shape[1])
            (got,) = method.execute([ids, pos])
            want = eager.step("forward", ids, pos)
            _assert_close(self, got, want, f"{path}: call {k} (T={ids.shape[1]} at {start})")
            start += ids.shape[1]
            ids = torch.tensor([[int(want[0, -1].argmax())]])


@delegate_library.needs_library
class LlamaDynamicPrefillTest(parameterized.TestCase):
    @classmethod
    def setUpClass(cls):
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

        cls.model = H.FAMILIES["llama"].model()
        wrapper = TorchExportableModuleForDecoderOnlyLM(
            cls.model, batch_size=1, max_cache_len=H.MAX_CACHE_LEN
        )
        length = torch.export.Dim("T", min=1, max=H.MAX_CACHE_LEN - 1)
        with torch.no_grad():
            methods = {
                "prefill": wrapper.export(
                    input_ids=torch.ones(1, H.PROMPT_LEN, dtype=torch.long),
                    cache_position=torch.arange(H.PROMPT_LEN),
                    dynamic_shapes={"input_ids": {1: length}, "cache_position": {0: length}},
                    strict=True,
                ),
                "decode": wrapper.export(
                    input_ids=torch.tensor([[7]]), cache_position=torch.tensor([H.PROMPT_LEN])
                ),
            }
        cls.et = executorch_trt.export(methods)
        torch.manual_seed(5)
        cls.tokens = torch.randint(3, H.VOCAB, (1, H.MAX_CACHE_LEN))

    def _run(self, chunks, decode_steps):
        """Prefills ``chunks`` (lengths, consecutive positions), then greedy-decodes
        ``decode_steps`` tokens, on the program and on eager; compares every call."""
        program = runtime.load(self.et.buffer)
        eager = H.DecoderOnlyEager(self.model)
        start, token = 0, None
        calls = [("prefill", n) for n in chunks] + [("decode", 1)] * decode_steps
        for k, (method, n) in enumerate(calls):
            ids = (
                self.tokens[:, start : start + n]
                if method == "prefill"
                else torch.tensor([[token]])
            )
            pos = torch.arange(start, start + n)
            copied = runtime.bytes_copied()
            (got,) = program.load_method(method).execute([ids, pos])
            self.assertEqual(runtime.bytes_copied() - copied, 0, f"call {k}: state copied")
            want = eager.step(method, ids, pos)
            _assert_close(self, got, want, f"call {k} ({method} of {n} at {start})")
            token = int(want[0, -1].argmax())
            start += n

    @parameterized.parameters(1, 2, H.MAX_CACHE_LEN - 2, H.MAX_CACHE_LEN - 1)
    def test_prompt_length(self, length):
        self._run([length], decode_steps=min(2, H.MAX_CACHE_LEN - length))

    def test_chunked_prefill(self):
        self._run([3, 4, 1], decode_steps=2)


@delegate_library.needs_library
class T5Seq2SeqExportTest(parameterized.TestCase):
    """transformers' ``Seq2SeqLMExportableModule(...).export()``, as shipped."""

    MAX_HIDDEN = 24

    @classmethod
    def setUpClass(cls):
        import transformers as T
        from transformers.integrations.executorch import Seq2SeqLMExportableModule

        torch.manual_seed(H.SEED)
        config = T.T5Config(
            vocab_size=H.VOCAB,
            d_model=H.HIDDEN,
            d_kv=16,
            d_ff=128,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
        cls.model = T.T5ForConditionalGeneration(config).eval()
        cls.model.generation_config.cache_implementation = "static"
        cls.model.generation_config.use_cache = True
        exportable = Seq2SeqLMExportableModule(
            cls.model, max_hidden_seq_length=cls.MAX_HIDDEN, max_cache_length=H.MAX_CACHE_LEN
        ).export()
        cls.et = executorch_trt.export(
            {"encoder": exportable.exported_encoder, "decoder": exportable.exported_decoder}
        )

    @parameterized.parameters(1, 7, MAX_HIDDEN)
    def test_encoder_length_then_greedy_decode(self, length):
        from transformers.integrations.executorch import (
            Seq2SeqLMDecoderExportableModuleWithStaticCache,
        )

        program = runtime.load(self.et.buffer)
        eager_decoder = Seq2SeqLMDecoderExportableModuleWithStaticCache(
            copy.deepcopy(self.model), max_static_cache_length=H.MAX_CACHE_LEN, batch_size=1
        ).eval()
        torch.manual_seed(length)
        ids = torch.randint(2, H.VOCAB, (1, length))
        (hidden,) = program.load_method("encoder").execute([ids])
        with torch.no_grad():
            want_hidden = self.model.get_encoder()(input_ids=ids).last_hidden_state
        _assert_close(self, hidden, want_hidden, f"encoder of {length}")
        token = 0  # T5's decoder start token
        for step in range(4):
            inputs = [torch.tensor([[token]]), hidden, torch.tensor([step])]
            copied = runtime.bytes_copied()
            (got,) = program.load_method("decoder").execute(inputs)
            self.assertEqual(runtime.bytes_copied() - copied, 0, f"step {step}: state copied")
            with torch.no_grad():
                want = eager_decoder(inputs[0], want_hidden, inputs[2])
            _assert_close(self, got, want, f"encoder of {length}, decode step {step}")
            token = int(want[0, -1].argmax())


if __name__ == "__main__":
    absltest.main()
