"""The HF -> Meta weight conversion behind the `executorch_llm_recipe` variant, checked without
exporting: ExecuTorch's own Llama transformer (the module its recipe exports), built from the
converted checkpoint and the params JSON, gives the transformers model's logits, for untied
and tied embeddings and a non-default RMSNorm epsilon and RoPE base."""

import dataclasses
import json
import tempfile

import torch
from absl.testing import absltest

from benchmarks import llm_recipe
from benchmarks.generate_config import TINY


def _recipe_logits(model, spec, ids: torch.Tensor) -> torch.Tensor:
    """The recipe's eager model (no KV cache) on `ids`: logits of the last position."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    with tempfile.TemporaryDirectory() as directory:
        checkpoint, params_path = llm_recipe.write_inputs(model, spec.dims, directory)
        with open(params_path) as f:
            params = json.load(f)
        state = torch.load(checkpoint)
    args = ModelArgs(max_seq_len=32, max_context_len=32, **params)
    transformer = construct_transformer(args).eval()
    missing, unexpected = transformer.load_state_dict(state, strict=False)
    assert not [k for k in missing if k.endswith(".weight")], missing
    assert not unexpected, unexpected
    with torch.no_grad():
        return transformer(ids).reshape(-1, spec.dims.vocab_size)[-1]


class HfToMetaTest(absltest.TestCase):
    def _check(self, spec):
        model = spec.build(32)
        ids = torch.randint(
            0, spec.dims.vocab_size, (1, 12), generator=torch.Generator().manual_seed(3)
        )
        with torch.no_grad():
            want = model(ids).logits[0, -1]
        got = _recipe_logits(model, spec, ids)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)

    def test_untied(self):
        self._check(TINY)

    def test_tied_with_other_eps_and_rope_base(self):
        self._check(
            dataclasses.replace(TINY, tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=5e4)
        )

    def test_params_mirror_the_config(self):
        p = llm_recipe.params(TINY.dims, 1e-6, 5e4)
        self.assertEqual(
            (p["dim"], p["hidden_dim"], p["n_heads"], p["n_kv_heads"], p["n_layers"]),
            (64, 128, 4, 2, 2),
        )
        self.assertEqual((p["vocab_size"], p["norm_eps"], p["rope_theta"]), (512, 1e-6, 5e4))
        self.assertFalse(p["use_hf_rope"])

    def test_tied_output_is_the_embedding_table(self):
        model = dataclasses.replace(TINY, tie_word_embeddings=True).build(32)
        state = llm_recipe.hf_to_meta(model.state_dict(), TINY.dims)
        self.assertTrue(torch.equal(state["output.weight"], state["tok_embeddings.weight"]))


if __name__ == "__main__":
    absltest.main()
