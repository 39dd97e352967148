"""The delegate computes what PyTorch computes where the CPU kernels it nests would not:
ExecuTorch 1.5.1's integer ``remainder`` (C's sign; ``passes/integer_remainder.py``) and
XNNPACK's tanh GELU, NaN-dropping ``maximum``/``minimum`` and tensors of more than 6 dimensions
(``engines/portable/xnnpack_configs.py``). Plain ExecuTorch returns other numbers than eager for
each of these, with no error.

Each model goes through ``executorch_trt.export`` (and the composable path for the remainder)
and runs for several calls, state included, against eager PyTorch element by element.
"""

import copy
import warnings

import torch
from absl.testing import absltest, parameterized
from executorch.exir import to_edge_transform_and_lower

import delegate_library
import executorch_trt
from executorch_trt import runtime


class Remainder(torch.nn.Module):
    """``a % b`` of two integer tensors, and ``a % 3`` / ``a % -3`` (the Scalar overload)."""

    def forward(self, a, b):
        return a % b, a % 3, torch.remainder(a, -3)


class RingIndex(torch.nn.Module):
    """A ring buffer's write position ``(pos + step) % 4`` kept in an int32 buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.zeros(1, dtype=torch.int32))

    def forward(self, step):
        self.pos.copy_((self.pos + step) % 4)
        return self.pos + 0


class GeluTanhLinear(torch.nn.Module):
    """GPT-2's MLP: ``linear, gelu(approximate="tanh"), linear``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x), approximate="tanh"))


class RunningMax(torch.nn.Module):
    """A running maximum in a buffer, and a minimum against zero."""

    def __init__(self):
        super().__init__()
        self.register_buffer("peak", torch.full((3,), -1e9))

    def forward(self, x):
        self.peak.copy_(torch.maximum(self.peak, x))
        return self.peak + 0, torch.minimum(x, torch.zeros(3))


class Rank7(torch.nn.Module):
    """Arithmetic on a 7-D value (XNNPACK takes at most 6 dimensions)."""

    def forward(self, x):
        return (x.view(1, 2, 1, 2, 1, 2, 2) * 2.0 + 1.0).sum(-1)


def _export(model, args, composable=False):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(copy.deepcopy(model), args)
        if composable:
            program = to_edge_transform_and_lower(
                ep,
                partitioner=[executorch_trt.TensorRTPartitioner()],
                transform_passes=executorch_trt.transform_passes(),
            ).to_executorch(executorch_trt.backend_config())
        else:
            program = executorch_trt.export(ep)
    return runtime.load(program.buffer).load_method("forward")


def _check_calls(test, model, calls, composable=False):
    """Runs ``model`` and its program on each argument tuple of ``calls`` in turn; every
    output equal to eager's (NaN where eager has NaN)."""
    method = _export(model, calls[0], composable)
    eager = copy.deepcopy(model)
    for i, args in enumerate(calls):
        want = eager(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = method.execute(list(args))
        test.assertEqual(len(got), len(want))
        for j, (g, w) in enumerate(zip(got, want)):
            torch.testing.assert_close(
                g, w, rtol=0, atol=0, equal_nan=True, msg=f"call {i}, output {j}"
            )


@delegate_library.needs_library
class IntegerRemainderTest(parameterized.TestCase):
    @parameterized.parameters(torch.int64, torch.int32, torch.int8)
    def test_signs_of_dividend_and_divisor(self, dtype):
        # Eager: a % b = [1, 2, -2, 1, 0, -1]; C's remainder would give [1, -1, 1, -2, 0, 2].
        a = torch.tensor([7, -7, 100, -128, 6, 2], dtype=dtype)
        b = torch.tensor([2, 3, -3, 3, -3, -3], dtype=dtype)
        _check_calls(self, Remainder(), [(a, b), (-a, b), (a, -b)])

    def test_composable_path(self):
        a = torch.tensor([7, -7, 100, -128])
        b = torch.tensor([2, 3, -3, 3])
        _check_calls(self, Remainder(), [(a, b), (-a, -b)], composable=True)

    def test_ring_index_with_a_negative_step(self):
        # Eager: 3, 2, 1, then 3 again after +2; C's remainder would give -1, -2, -3.
        steps = [-1, -1, -1, 2, -5]
        _check_calls(self, RingIndex(), [(torch.tensor([s], dtype=torch.int32),) for s in steps])


@delegate_library.needs_library
class XnnpackSemanticsTest(absltest.TestCase):
    def test_gelu_tanh_is_not_the_erf_gelu(self):
        x = torch.linspace(-3, 3, 16).reshape(2, 8)
        method = _export(GeluTanhLinear(), (x,))
        got = method.execute([x])[0]
        model = GeluTanhLinear()
        torch.testing.assert_close(got, model(x), rtol=1e-6, atol=1e-6)
        # The erf GELU's result is ~1e-4 away: the tolerance above tells them apart.
        exact = model.down(torch.nn.functional.gelu(model.up(x)))
        self.assertGreater((exact - model(x)).abs().max().item(), 1e-5)

    def test_maximum_and_minimum_keep_nan(self):
        nan = float("nan")
        calls = [(torch.tensor([1.0, nan, -2.0]),), (torch.tensor([0.0, 5.0, 3.0]),)]
        _check_calls(self, RunningMax(), calls)

    def test_more_than_six_dimensions_runs(self):
        x = torch.arange(16.0)
        _check_calls(self, Rank7(), [(x,), (x * -1,)])


if __name__ == "__main__":
    absltest.main()
