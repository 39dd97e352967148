"""ExecuTorch's torch.cond cache ops with executorch_trt's ``.out`` overloads.

Eager ``.out`` semantics against the functional ops' definitions, errors for bad input, and a
plain ExecuTorch program (no delegate) that uses both ops: ``to_executorch`` finds the out
variants and the program runs on ``libexecutorch_trt``'s C++ kernels with eager's values.
"""

import torch
from absl.testing import absltest
from executorch.exir import to_edge

import delegate_library
import executorch_trt.ops  # noqa: F401  (the .out overloads)
from executorch_trt.ops import cross_attn_cache as X


def _value_cache():
    torch.manual_seed(0)
    return torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4)


class EagerOutTest(absltest.TestCase):
    def test_update_out_in_place_writes_the_first_rows(self):
        value, cache = _value_cache()
        expected = cache.clone()
        expected[:, :, :3] = value
        storage = cache.data_ptr()
        result = X.update_cross_attn_cache_out(value, cache, out=cache)
        self.assertEqual(result.data_ptr(), storage)
        torch.testing.assert_close(cache, expected, rtol=0, atol=0)

    def test_update_out_separate_matches_the_functional_op(self):
        value, cache = _value_cache()
        out = torch.empty_like(cache)
        X.update_cross_attn_cache_out(value, cache.clone(), out=out)
        reference = X.update_cross_attn_cache(value, cache.clone())
        torch.testing.assert_close(out, reference, rtol=0, atol=0)

    def test_alias_out_copies_only_into_separate_outputs(self):
        x, y = torch.randn(2, 3), torch.arange(4)
        y_out = torch.empty_like(y)
        a, b = X.alias_out(x, y, out0=x, out1=y_out)
        self.assertEqual(a.data_ptr(), x.data_ptr())
        self.assertTrue(torch.equal(b, y))

    def test_bad_input_raises_naming_it(self):
        value, cache = _value_cache()
        for bad_value, message in (
            (value[0], "4-D"),
            (value.double(), "dtype"),
            (torch.randn(1, 2, 6, 4), "exceeds"),
            (torch.randn(1, 3, 3, 4), "heads"),
        ):
            with self.subTest(message=message), self.assertRaisesRegex(ValueError, message):
                X.update_cross_attn_cache_out(bad_value, cache, out=cache)
        with self.assertRaisesRegex(ValueError, "out0 has dtype"):
            X.alias_out(value, cache, out0=value.double(), out1=cache)


class _UsesBothOps(torch.nn.Module):
    def forward(self, value, cache, x):
        updated = torch.ops.executorch.update_cross_attn_cache(value, cache)
        a, b = torch.ops.executorch.alias(updated, x)
        return a * 1, b + 1


@delegate_library.needs_library
class PlainProgramTest(absltest.TestCase):
    """No delegate: the ops run on the kernels ``libexecutorch_trt`` registers."""

    @classmethod
    def setUpClass(cls):
        from executorch_trt import runtime

        value, cache = _value_cache()
        cls.args = (value, cache, torch.randn(3))
        with torch.no_grad():
            cls.et = to_edge(torch.export.export(_UsesBothOps(), cls.args)).to_executorch()
        cls.method = runtime.load(cls.et.buffer).load_method("forward")

    def test_out_variants_are_in_the_plan(self):
        ops = {
            (op.name, op.overload) for op in self.et.executorch_program.execution_plan[0].operators
        }
        self.assertIn(("executorch::update_cross_attn_cache", "out"), ops)
        self.assertIn(("executorch::alias", "out"), ops)

    def test_values_equal_eager(self):
        value, cache, x = self.args
        got = self.method.execute([value, cache.clone(), x])
        # Eager `executorch::alias` trips PyTorch's custom-op aliasing check (it returns its
        # inputs), so the reference is written out: the update, then the pass-through.
        updated = X.update_cross_attn_cache(value, cache.clone())
        want = (updated * 1, x + 1)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


if __name__ == "__main__":
    absltest.main()
