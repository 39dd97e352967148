"""A norm's mean in the XNNPACK form in the portable engine's nested program
(``passes.mean_as_pooling``).

* transformers' Llama (examples/decoder_model.py) through ``export_llm`` with prefill and
  decode: no ``aten::mean`` kernel is left in either nested program (every RMSNorm's mean runs
  in XNNPACK), each method makes fewer XNNPACK calls than the same export without the pass, and
  the logits of prompts of several lengths (the dynamic T) and of decode steps equal eager's.
* Means the pass leaves alone (over another dimension, of a 2-D value, without keepdim) are
  still right, through ``executorch_trt.export``.
"""

import unittest.mock

import torch
from absl.testing import absltest, parameterized
from executorch.exir import schema

import delegate_library
import executorch_trt
from decoder_model import build_model
from decoder_models import LinearThenForm
from executorch_trt import runtime
from executorch_trt.inspection.plan import kernel_calls
from executorch_trt.llm import export_llm
from lowering_utils import check_prompts_then_decode, nested_plans, nested_xnnpack_calls

MAX_SEQ_LEN = 8
CAPACITY = 32


def _means(plan: schema.ExecutionPlan) -> int:
    return sum(name == "aten::mean" for _, name, _ in kernel_calls(plan))


@delegate_library.needs_library
class DecoderNormsTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = build_model(CAPACITY)
        cls.program = export_llm(
            cls.model, MAX_SEQ_LEN, max_context_len=CAPACITY, prefill_decode=True
        )
        with unittest.mock.patch(
            "executorch_trt.passes.pipeline.mean_as_pooling", lambda graph_module: 0
        ):
            cls.without = export_llm(
                cls.model, MAX_SEQ_LEN, max_context_len=CAPACITY, prefill_decode=True
            )

    def test_no_mean_kernel_and_fewer_xnnpack_calls(self):
        plans, before = nested_plans(self.program), nested_plans(self.without)
        layers = self.model.config.num_hidden_layers
        for method in ("prefill", "decode"):
            # Each layer's two norms and the final one: portable kernels without the pass.
            self.assertEqual(_means(before[method]), 2 * layers + 1, method)
            self.assertEqual(_means(plans[method]), 0, method)
            self.assertLess(
                nested_xnnpack_calls(plans[method]), nested_xnnpack_calls(before[method]), method
            )

    def test_prompts_of_several_lengths_then_decode_match_eager(self):
        loaded = runtime.load(self.program.buffer)
        prefill, decode = loaded.load_method("prefill"), loaded.load_method("decode")
        check_prompts_then_decode(self.model, prefill, decode, MAX_SEQ_LEN)


class _Means(LinearThenForm):
    """``x[2, 3, 16] -> linear(x) * mean(...)``: the mean's form set by ``form``."""

    def form_of(self, y):
        if self.form == "middle":
            return y * y.mean(1, keepdim=True)
        if self.form == "no_keepdim":
            return y * y.mean(-1).unsqueeze(-1)
        if self.form == "rank2":
            flat = y.reshape(6, 16)
            return (flat * flat.mean(-1, keepdim=True)).reshape(2, 3, 16)
        return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)


@delegate_library.needs_library
class OtherMeansTest(parameterized.TestCase):
    @parameterized.parameters("rms", "middle", "no_keepdim", "rank2")
    def test_matches_eager(self, form):
        model = _Means(form).eval()
        x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
        program = executorch_trt.export(torch.export.export(model, (x,)))
        (got,) = runtime.load(program.buffer).load_method("forward").execute([x])
        with torch.no_grad():
            torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)


if __name__ == "__main__":
    absltest.main()
