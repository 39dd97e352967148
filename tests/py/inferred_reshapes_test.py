"""A dynamic value's reshapes in the XNNPACK form in the portable engine's nested program
(``passes.inferred_reshapes``).

* transformers' Llama (examples/decoder_model.py) through ``export_llm``'s one dynamic
  ``forward``: each layer's q/k/v/output reshapes and its cos/sin unsqueezes leave ExecuTorch's
  portable kernels for XNNPACK, the method makes fewer XNNPACK calls than the same export
  without the pass, and the logits of prompts of several lengths (the dynamic T) and of decode
  steps equal eager's.
* Reshapes the pass leaves alone (two dynamic sizes; static) are still right, through
  ``executorch_trt.export`` with dynamic shapes.
"""

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
from decoder_models import LinearThenForm
from executorch_trt import runtime
from lowering_utils import NestedPassOnDynamicForward, kernels_in_layers, nested_xnnpack_calls

#: Reshape kernels (a portable ``view_copy`` is planned as ``et_view``).
RESHAPES = ("aten::view_copy", "aten::unsqueeze_copy", "executorch_prim::et_view")


@delegate_library.needs_library
class DynamicDecoderTest(NestedPassOnDynamicForward, absltest.TestCase):
    PASS = "reshapes_as_inferred_views"

    def test_layer_reshapes_leave_portable_kernels(self):
        plan, before = self.plan, self.before
        layers = self.model.config.num_hidden_layers
        # Per layer without the pass: the q, k, v and attention-output views and the cos and
        # sin unsqueezes.
        self.assertEqual(kernels_in_layers(before, RESHAPES), 6 * layers)
        self.assertEqual(kernels_in_layers(plan, RESHAPES), 0)
        self.assertLess(nested_xnnpack_calls(plan), nested_xnnpack_calls(before))


class _Reshapes(LinearThenForm):
    """``x[B, T, 16] -> linear(x)`` reshaped as ``form`` says, then back."""

    def form_of(self, y):
        b, t, _ = y.shape
        if self.form == "two_dynamic":  # B and T both dynamic: nothing single to infer
            return (y.view(b, t, 4, 4) * 2).view(b, t, 16)
        if self.form == "unsqueeze_middle":
            return (y.unsqueeze(1) + 1).squeeze(1)
        return (y.view(b, t, 4, 4).transpose(2, 3) * 2).reshape(b, t, 16)


@delegate_library.needs_library
class OtherReshapesTest(parameterized.TestCase):
    @parameterized.parameters(
        ("view", False), ("unsqueeze_middle", False), ("two_dynamic", True), ("view", True)
    )
    def test_matches_eager(self, form, dynamic_batch):
        model = _Reshapes(form).eval()
        x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
        t = torch.export.Dim("t", min=1, max=8)
        shapes = {"x": {0: torch.export.Dim("b", min=1, max=4), 1: t} if dynamic_batch else {1: t}}
        program = executorch_trt.export(torch.export.export(model, (x,), dynamic_shapes=shapes))
        forward = runtime.load(program.buffer).load_method("forward")
        for shape in ((2, 3), (1, 1), (2, 8)) if dynamic_batch else ((2, 3), (2, 1), (2, 8)):
            x = torch.randn(*shape, 16, generator=torch.Generator().manual_seed(shape[1]))
            (got,) = forward.execute([x])
            with torch.no_grad():
                torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)


if __name__ == "__main__":
    absltest.main()
