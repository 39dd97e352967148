"""RoPE's ``rotate_half`` of a dynamic value as a linear layer XNNPACK runs, in the portable
engine's nested program (``passes.rotate_half``).

* ``rotation_matrix``: ``linear(x, R)`` equals transformers' ``rotate_half(x)`` bit for bit.
* transformers' Llama (examples/decoder_model.py) through ``export_llm``'s one dynamic
  ``forward``: no slice is left on ExecuTorch's portable kernels inside the layers, the method
  makes fewer XNNPACK calls than the same export without the pass, and the logits of prompts of
  several lengths and of decode steps equal eager's.
* Look-alikes the pass leaves alone (the halves the other way round, a part that is not
  a half, static shapes) are still right, through ``executorch_trt.export``.
"""

import torch
from absl.testing import absltest, parameterized

import delegate_library
import executorch_trt
from decoder_models import LinearThenForm
from executorch_trt import runtime
from executorch_trt.passes.rotate_half import rotation_matrix
from lowering_utils import NestedPassOnDynamicForward, kernels_in_layers, nested_xnnpack_calls

SLICE = ("aten::slice_copy",)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """transformers' ``rotate_half`` (models/llama/modeling_llama.py)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotationMatrixTest(parameterized.TestCase):
    @parameterized.parameters(2, 64, 128)
    def test_linear_equals_rotate_half_exactly(self, size):
        x = torch.randn(2, 3, 5, size, generator=torch.Generator().manual_seed(size))
        got = torch.nn.functional.linear(x, rotation_matrix(size))
        self.assertTrue(torch.equal(got, _rotate_half(x)))


@delegate_library.needs_library
class DynamicDecoderTest(NestedPassOnDynamicForward, absltest.TestCase):
    PASS = "rotate_half_as_linear"

    def test_no_slice_kernel_in_layers_and_fewer_xnnpack_calls(self):
        plan, before = self.plan, self.before
        layers = self.model.config.num_hidden_layers
        # Per layer, q's and k's two halves leave the portable kernels (the logits' last
        # position is another slice).
        slices, slices_before = kernels_in_layers(plan, SLICE), kernels_in_layers(before, SLICE)
        self.assertEqual(slices_before - slices, 4 * layers)
        self.assertLessEqual(slices, 1)
        self.assertLess(nested_xnnpack_calls(plan), nested_xnnpack_calls(before))


class _WeightNamedLikeR(torch.nn.Module):
    """``rotate_half(x * w)`` with ``w`` registered as ``rotate_half_16``, the name the pass
    asks for its matrix: the partition's weight of that name must stay ``w``."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.rotate_half_16 = torch.nn.Parameter(torch.randn(16, generator=g))

    def forward(self, x):
        return _rotate_half(x * self.rotate_half_16)


@delegate_library.needs_library
class NameClashTest(absltest.TestCase):
    def test_weight_named_like_the_matrix_matches_eager(self):
        model = _WeightNamedLikeR().eval()
        x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(4))
        shapes = {"x": {1: torch.export.Dim("t", min=1, max=8)}}
        program = executorch_trt.export(torch.export.export(model, (x,), dynamic_shapes=shapes))
        forward = runtime.load(program.buffer).load_method("forward")
        for length in (3, 1, 8):
            x = torch.randn(2, length, 16, generator=torch.Generator().manual_seed(length))
            (got,) = forward.execute([x])
            with torch.no_grad():
                torch.testing.assert_close(got, model(x), atol=1e-6, rtol=1e-6)


class _Halves(LinearThenForm):
    """``x[B, T, 16] -> linear(x)``, then ``rotate_half`` or a look-alike, as ``form`` says."""

    def form_of(self, y):
        if self.form == "swapped":  # cat(x1, -x2): not rotate_half
            return torch.cat((y[..., :8], -y[..., 8:]), dim=-1)
        if self.form == "short":  # the upper part stops one short: not a half
            return torch.cat((-y[..., 8:15], y[..., :8]), dim=-1)
        return _rotate_half(y)


@delegate_library.needs_library
class OtherHalvesTest(parameterized.TestCase):
    @parameterized.parameters(
        ("rotate_half", True), ("rotate_half", False), ("swapped", True), ("short", True)
    )
    def test_matches_eager(self, form, dynamic):
        model = _Halves(form).eval()
        x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
        shapes = {"x": {1: torch.export.Dim("t", min=1, max=8)}} if dynamic else None
        program = executorch_trt.export(torch.export.export(model, (x,), dynamic_shapes=shapes))
        forward = runtime.load(program.buffer).load_method("forward")
        for length in (3, 1, 8) if dynamic else (3,):
            x = torch.randn(2, length, 16, generator=torch.Generator().manual_seed(length))
            (got,) = forward.execute([x])
            with torch.no_grad():
                torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)


if __name__ == "__main__":
    absltest.main()
