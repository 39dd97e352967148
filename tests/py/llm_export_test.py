"""``executorch_trt.llm.export_llm`` on several architectures, through ``executorch_trt.runtime``
(the portable engine: a nested ExecuTorch program with XNNPACK, on the CPU).

* ``forward`` with a dynamic length (Qwen3, Gemma-3 with a sliding window, GPT-2; and in
  ``MoreArchitecturesTest`` Qwen2, Mistral with a sliding window, Gemma-2, SmolLM3, Phi-3;
  Llama below and in llm_runner_test): a 5-token prompt, then T = 1 steps (greedy), on one
  loaded program; each call's logits (the last token's, ``[1, 1, vocab]``; every token's with
  ``generate_full_logits``) equal the plain model's no-cache forward over the whole sequence
  so far (an eager reference independent of the export wrapper), within 1e-4 of their scale;
  the delegate copies 0 bytes and no state is written back (``executorch_trt.inspect``).
* ``prefill_decode=True``: ``prefill`` and ``decode`` share the cache (the same checks).
* The metadata methods the LLM runner reads, with their values.
* What ``export_llm`` refuses, each naming the problem: an unsupported architecture (with the
  supported list), a non-causal-LM class of a supported type, a model not in ``dtype``,
  lengths out of range, and checkpoint directories without config.json / weights.
"""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
import hf_models as H
import llm_test_models as M
from executorch_trt import runtime
from executorch_trt.llm import (
    SUPPORTED_ARCHITECTURES,
    CheckpointError,
    UnsupportedArchitectureError,
    export_llm,
)

MAX_SEQ_LEN = 32
PROMPT_LEN = 5
DECODE_STEPS = 3
METADATA_METHODS = {
    "get_max_seq_len",
    "get_max_context_len",
    "get_vocab_size",
    "get_bos_id",
    "get_eos_ids",
    "use_kv_cache",
    "enable_dynamic_shape",
}


def _full_forward(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def _step(program_methods, method, ids, pos):
    before = runtime.bytes_copied()
    (logits,) = program_methods[method].execute([ids, pos])
    return logits, runtime.bytes_copied() - before


class _RunsLikeEager:
    """Prompt then greedy T = 1 steps on a program, each call's logits vs the no-cache forward
    of everything so far."""

    def assert_runs_like_eager(self, model, program, prefill, decode, full_logits=False):
        loaded = runtime.load(program.buffer)
        methods = {m: loaded.load_method(m) for m in {prefill, decode}}
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(3, model.config.vocab_size, (1, PROMPT_LEN), generator=g)
        sequence, start = ids, 0
        for k in range(1 + DECODE_STEPS):
            method = prefill if k == 0 else decode
            pos = torch.arange(start, start + ids.shape[1])
            got, copied = _step(methods, method, ids, pos)
            want = _full_forward(model, sequence)[:, start if full_logits else -1 :]
            where = f"call {k} ({method}, T={ids.shape[1]} at {start})"
            self.assertEqual(tuple(got.shape), tuple(want.shape), where)
            scale = max(1.0, float(want.abs().max()))
            diff = float((got - want).abs().max())
            self.assertLessEqual(diff, 1e-4 * scale, f"{where}: max |dlogit| {diff}")
            self.assertEqual(copied, 0, f"{where}: bytes the delegate copied")
            start += ids.shape[1]
            ids = torch.tensor([[int(want[0, -1].argmax())]])
            sequence = torch.cat([sequence, ids], dim=1)
        report = executorch_trt.inspect(program)
        self.assertTrue(report.summary.zero_copy, str(report))
        self.assertEqual(report.summary.engines, {"portable": 1 if prefill == decode else 2})


@delegate_library.needs_library
class ForwardTest(_RunsLikeEager, parameterized.TestCase):
    @parameterized.parameters("qwen3", "gemma3", "gpt2")
    def test_prompt_then_single_token_steps_match_eager(self, family):
        model = H.FAMILIES[family].model()
        program = export_llm(model, MAX_SEQ_LEN)
        self.assertEqual(runtime.load(program.buffer).method_names, {"forward"} | METADATA_METHODS)
        self.assert_runs_like_eager(model, program, "forward", "forward")

    def test_generate_full_logits_returns_every_tokens_logits(self):
        model = H.FAMILIES["qwen3"].model()
        program = export_llm(model, MAX_SEQ_LEN, generate_full_logits=True)
        self.assert_runs_like_eager(model, program, "forward", "forward", full_logits=True)


def _qwen2():
    import transformers as T

    return T.Qwen2ForCausalLM(T.Qwen2Config(**H._COMMON))


def _mistral():
    import transformers as T

    # A window shorter than the prompt plus the steps: decoding runs past it.
    return T.MistralForCausalLM(T.MistralConfig(sliding_window=4, **H._COMMON))


def _gemma2():
    import transformers as T

    return T.Gemma2ForCausalLM(T.Gemma2Config(head_dim=16, sliding_window=4, **H._COMMON))


def _smollm3():
    import transformers as T

    return T.SmolLM3ForCausalLM(T.SmolLM3Config(**H._COMMON))


@delegate_library.needs_library
class MoreArchitecturesTest(_RunsLikeEager, parameterized.TestCase):
    """The other supported architectures, each once (a separate Bazel target runs this class)."""

    @parameterized.named_parameters(
        ("qwen2", _qwen2),
        ("mistral_sliding_window", _mistral),
        ("gemma2", _gemma2),
        ("smollm3", _smollm3),
        ("phi3", H.FAMILIES["phi3"].build),
    )
    def test_prompt_then_single_token_steps_match_eager(self, build):
        model = H.seeded(build)
        program = export_llm(model, MAX_SEQ_LEN)
        self.assertIn(type(model).__name__, SUPPORTED_ARCHITECTURES.values())
        self.assert_runs_like_eager(model, program, "forward", "forward")


@delegate_library.needs_library
class PrefillDecodeTest(_RunsLikeEager, absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = H.FAMILIES["llama"].model()
        cls.program = export_llm(
            cls.model, MAX_SEQ_LEN, max_context_len=MAX_SEQ_LEN + 8, prefill_decode=True
        )

    def test_prefill_then_decode_match_eager(self):
        self.assertEqual(
            runtime.load(self.program.buffer).method_names, {"prefill", "decode"} | METADATA_METHODS
        )
        self.assert_runs_like_eager(self.model, self.program, "prefill", "decode")

    def test_metadata_methods(self):
        loaded = runtime.load(self.program.buffer)
        got = {name: loaded.load_method(name).execute([]) for name in METADATA_METHODS}
        self.assertEqual(
            got,
            {
                "enable_dynamic_shape": [True],
                "get_bos_id": [1],
                "get_eos_ids": [2],
                "get_max_context_len": [MAX_SEQ_LEN + 8],
                "get_max_seq_len": [MAX_SEQ_LEN],
                "get_vocab_size": [H.VOCAB],
                "use_kv_cache": [True],
            },
        )


class RefusalsTest(absltest.TestCase):
    """Each refusal before any export work, naming what was wrong."""

    def test_unsupported_architecture_names_it_and_the_supported_ones(self):
        import transformers as T

        model = T.OPTForCausalLM(M.tiny_opt_config()).eval()
        with self.assertRaises(UnsupportedArchitectureError) as cm:
            export_llm(model, 16)
        message = str(cm.exception)
        self.assertIn("OPTForCausalLM", message)
        self.assertIn("'opt'", message)
        for cls in SUPPORTED_ARCHITECTURES.values():
            self.assertIn(cls, message)

    def test_a_supported_type_that_is_not_its_causal_lm(self):
        import transformers as T

        model = T.LlamaForSequenceClassification(T.LlamaConfig(**H._COMMON)).eval()
        with self.assertRaisesRegex(
            UnsupportedArchitectureError, "LlamaForSequenceClassification.*LlamaForCausalLM"
        ):
            export_llm(model, 16)

    def test_not_a_model(self):
        with self.assertRaisesRegex(TypeError, "transformers causal LM.*torch.nn.*Linear"):
            export_llm(torch.nn.Linear(2, 2), 16)

    def test_dtype_mismatch(self):
        model = H.FAMILIES["llama"].model().to(torch.bfloat16)
        with self.assertRaisesRegex(ValueError, r"torch.bfloat16, not dtype=torch.float32"):
            export_llm(model, 16)
        with self.assertRaisesRegex(TypeError, "dtype must be a torch.dtype.*'bfloat16'"):
            export_llm(model, 16, dtype="bfloat16")

    def test_lengths(self):
        model = H.FAMILIES["llama"].model()  # max_position_embeddings 64
        for kwargs, pattern in [
            (dict(max_seq_len=1), "max_seq_len must be at least 2"),
            (
                dict(max_seq_len=16, max_context_len=8),
                (
                    r"max_context_len \(8.*at least "
                    r"max_seq_len \(16\)"
                ),
            ),
            (
                dict(max_seq_len=16, max_context_len=65),
                "beyond the model's max_position_embeddings 64",
            ),
        ]:
            with self.subTest(**kwargs), self.assertRaisesRegex(ValueError, pattern):
                export_llm(model, **kwargs)
        with self.assertRaisesRegex(TypeError, "max_seq_len must be an int"):
            export_llm(model, "16")
        for flag in ("prefill_decode", "generate_full_logits"):
            with self.assertRaisesRegex(TypeError, f"export_llm: {flag} must be True or False"):
                export_llm(model, 16, **{flag: "yes"})

    def test_dynamic_rope_scaling_is_refused(self):
        import transformers as T

        config = T.LlamaConfig(**H._COMMON, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
        with self.assertRaisesRegex(
            UnsupportedArchitectureError, r"rope_type 'dynamic' \(dynamic NTK scaling\)"
        ):
            export_llm(T.LlamaForCausalLM(config), 16)

    def test_checkpoint_directories(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "nope")
            with self.assertRaisesRegex(CheckpointError, f"{missing} does not exist"):
                export_llm(missing, 16)
            with self.assertRaisesRegex(CheckpointError, "has no config.json"):
                export_llm(tmp, 16)
            H.FAMILIES["llama"].model().config.save_pretrained(tmp)  # config.json only
            with self.assertRaisesRegex(CheckpointError, r"has no \*.safetensors weights"):
                export_llm(tmp, 16)

    def test_checkpoint_whose_weights_are_not_its_configs_model(self):
        # transformers would fill a missing weight at random (and drop an extra one), logging
        # only: the program would not be the checkpoint's model.
        import json

        from safetensors.torch import load_file, save_file

        for case, pattern in (
            ("weight_deleted", r"lacks weights .*\(model\.layers\.1\.self_attn\.q_proj\.weight\)"),
            ("one_more_layer", r"lacks weights .*model\.layers\.2\."),
            ("one_layer_fewer", r"holds weights .*model\.layers\.1\."),
        ):
            with self.subTest(case), tempfile.TemporaryDirectory() as tmp:
                H.FAMILIES["llama"].model().save_pretrained(tmp)
                weights = os.path.join(tmp, "model.safetensors")
                config = os.path.join(tmp, "config.json")
                if case == "weight_deleted":
                    tensors = load_file(weights)
                    del tensors["model.layers.1.self_attn.q_proj.weight"]
                    save_file(tensors, weights, metadata={"format": "pt"})
                else:
                    with open(config) as f:
                        settings = json.load(f)
                    settings["num_hidden_layers"] += 1 if case == "one_more_layer" else -1
                    with open(config, "w") as f:
                        json.dump(settings, f)
                with self.assertRaisesRegex(CheckpointError, pattern):
                    export_llm(tmp, 16)


if __name__ == "__main__":
    absltest.main()
