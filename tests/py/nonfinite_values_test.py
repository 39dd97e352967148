"""PyTorch's special float values survive the delegate's rewrites: inf and NaN stay in the
elements PyTorch puts them in, and a buffer whose initial value is ``-0.0`` starts as ``-0.0``.

Each model goes through ``executorch_trt.export`` (the portable engine, its nested XNNPACK
program and the nested passes) and runs through the runtime; outputs are compared with eager
PyTorch element by element, NaN where eager has NaN (``equal_nan``), and the sign of each zero.
"""

import warnings

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
from executorch_trt import runtime


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rope(torch.nn.Module):
    """RoPE's ``x * cos + rotate_half(x) * sin`` over ``x[1, T, 4]``."""

    def forward(self, x):
        return x * 2.0 + _rotate_half(x) * 0.5


class RmsScale(torch.nn.Module):
    """RMSNorm's ``x * rsqrt(mean(x^2))`` over ``x[1, T, 4]``."""

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


class NegativeZero(torch.nn.Module):
    """``1 / state``, then ``state *= x``: the first call reads the initial value."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.full((2,), -0.0))

    def forward(self, x):
        out = 1.0 / self.state
        self.state.mul_(x)
        return out


def _program(model, example, dynamic_shapes=None):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes)
        return runtime.load(executorch_trt.export(ep).buffer)


SPECIAL_ROWS = torch.tensor(
    [
        [
            [1.0, float("inf"), 3.0, 4.0],
            [1.0, 2.0, float("nan"), 4.0],
            [-float("inf"), 2.0, 3.0, 4.0],
            [1.0, 2.0, 3.0, 4.0],
        ]
    ]
)


@delegate_library.needs_library
class NonFiniteValuesTest(absltest.TestCase):
    def _check_dynamic(self, model):
        length = torch.export.Dim("T", min=1, max=16)
        program = _program(model, torch.randn(1, 3, 4), ({1: length},))
        method = program.load_method("forward")
        for rows in (SPECIAL_ROWS, SPECIAL_ROWS[:, :2], SPECIAL_ROWS[:, 3:]):
            got = method.execute([rows])[0]
            torch.testing.assert_close(got, model(rows), equal_nan=True, msg=f"{len(rows[0])} rows")

    def test_rotate_half_of_a_dynamic_value(self):
        # Eager: [0.5, inf, 6.5, inf] for the first row; a rotation written as a matrix product
        # would give NaN wherever 0 * inf lands.
        self._check_dynamic(Rope())

    def test_norm_mean_of_a_dynamic_value(self):
        self._check_dynamic(RmsScale())

    def test_negative_zero_initial_value(self):
        program = _program(NegativeZero(), torch.ones(2))
        self.assertTrue(torch.signbit(program.initial_value("state")).all())
        got = program.load_method("forward").execute([torch.ones(2)])[0]
        self.assertTrue(torch.equal(got, torch.full((2,), -float("inf"))), got)


if __name__ == "__main__":
    absltest.main()
