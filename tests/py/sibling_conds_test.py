"""Sibling ``torch.cond``s: the first cond's result is still right after the second ran.

Stock ExecuTorch 1.5.1 plans every cond branch of a graph from offset 0 of one shared region
and makes a cond's result its branch's own tensor (ExecuTorch #21490), so with
``a = cond(...)`` then ``b = cond(...)`` and ``a`` read afterwards, ``a`` holds the second
branch's result, for either predicate, with no error. The product copies such a result right
after its cond (``passes/cond_outputs.SiblingCondOutputsPass``), whether the conds stay above
the delegate (an operator the engine lacks), run inside it (the nested program), or the
program is finalised with ``backend_config()`` on the composable or plain path. A result read
through a view is copied even for a single cond (stock ExecuTorch plans the view on memory no
branch writes). Checked against eager PyTorch for both predicate values, next to stock
ExecuTorch's wrong answer.
"""

import torch
from absl.testing import absltest
from executorch.exir import to_edge, to_edge_transform_and_lower

import delegate_library
import executorch_trt
from executorch_trt.lowering.partitioner import TensorRTPartitioner
from executorch_trt.passes.cond_outputs import copy_sibling_cond_outputs


class InsideTheDelegate(torch.nn.Module):
    """Both conds use only operators the portable engine takes: the delegate runs them."""

    def forward(self, x, t):
        flag = x.sum() > t.sum()
        a = torch.cond(flag, lambda x: x * x + x, lambda x: x * x - x, (x,))
        b = torch.cond(flag, lambda x: x + x, lambda x: x - x.abs(), (x,))
        return a + b, a


class AboveTheDelegate(torch.nn.Module):
    """``expm1`` is not a portable-engine operator: both conds stay above the delegate."""

    def forward(self, x, t):
        flag = x.sum() > t.sum()
        a = torch.cond(flag, lambda x: torch.expm1(x) + x, lambda x: torch.expm1(x) - x, (x,))
        b = torch.cond(flag, lambda x: torch.expm1(x) * x, lambda x: torch.expm1(x) + 2 * x, (x,))
        return a * b, a


class ViewOfAResult(torch.nn.Module):
    """One cond, its result read through views: ExecuTorch plans the view on the cond output's
    own memory, which no branch writes (the branch's tensor is moved in instead)."""

    def forward(self, x, t):
        flag = x.sum() > t.sum()
        a = torch.cond(flag, lambda x: torch.expm1(x) + x, lambda x: torch.expm1(x) - x, (x,))
        return a.view(8).view(2, 2, 2)[0] * 2


class SiblingsInABranch(torch.nn.Module):
    """Sibling conds inside a cond branch, the first result read through a view after the
    second ran."""

    def forward(self, x, t):
        def outer(x):
            g = x.mean() > 0
            p = torch.cond(g, lambda x: x + 1, lambda x: x - 1, (x,))
            pv = p.view(8)
            q = torch.cond(g, lambda x: x * 2, lambda x: x * 3, (x,))
            return pv.view(2, 4) * 10 + q

        return torch.cond(x.sum() > t.sum(), outer, lambda x: x * 0 + 1, (x,)) + 0


class OneCond(torch.nn.Module):
    def forward(self, x, t):
        a = torch.cond(x.sum() > t.sum(), lambda x: x + 1, lambda x: x - 1, (x,))
        return a * 2


PREDICATES = {"true": torch.full((1,), -1e3), "false": torch.full((1,), 1e3)}


def _inputs(t):
    torch.manual_seed(0)
    return (torch.randn(2, 4), t)


def _max_diff(got, want):
    want = (want,) if isinstance(want, torch.Tensor) else want
    assert len(got) == len(want), (len(got), len(want))
    return max((g - w).abs().max().item() for g, w in zip(got, want))


@delegate_library.needs_library
class SiblingCondsTest(absltest.TestCase):
    def _programs(self, model, args):
        with torch.no_grad():
            stock = to_edge(torch.export.export(model, args)).to_executorch()
            delegated = executorch_trt.export(torch.export.export(model, args))
            composable = to_edge_transform_and_lower(
                torch.export.export(model, args), partitioner=[TensorRTPartitioner()]
            ).to_executorch(executorch_trt.backend_config())
            plain = to_edge(torch.export.export(model, args)).to_executorch(
                executorch_trt.backend_config()
            )
        return stock, {"delegated": delegated, "composable": composable, "plain": plain}

    def _check(self, model, delegate_runs_the_conds, stock_wrong_for=("true", "false")):
        from executorch.runtime import Runtime

        from executorch_trt import runtime

        runtime.load_library()
        for predicate, t in PREDICATES.items():
            args = _inputs(t)
            with torch.no_grad():
                want = model(*args)
            stock, programs = self._programs(model, args)
            if predicate in stock_wrong_for:
                with self.subTest(predicate=predicate, program="stock ExecuTorch"):
                    got = (
                        Runtime.get()
                        .load_program(stock.buffer)
                        .load_method("forward")
                        .execute(list(args))
                    )
                    # ExecuTorch #21490: the first cond's result is overwritten by the second's.
                    self.assertGreater(_max_diff(got, want), 0.1)
            for name, program in programs.items():
                with self.subTest(predicate=predicate, program=name):
                    got = runtime.load(program.buffer).load_method("forward").execute(list(args))
                    self.assertLess(_max_diff(got, want), 1e-5)
                    operators = executorch_trt.inspect(program.buffer).method("forward").operators
                    if name != "plain" and delegate_runs_the_conds is not None:
                        self.assertEqual(not operators, delegate_runs_the_conds, operators)

    def test_conds_inside_the_delegate(self):
        self._check(InsideTheDelegate().eval(), delegate_runs_the_conds=True)

    def test_conds_above_the_delegate(self):
        self._check(AboveTheDelegate().eval(), delegate_runs_the_conds=False)

    def test_a_view_of_one_conds_result(self):
        self._check(ViewOfAResult().eval(), delegate_runs_the_conds=None)

    def test_siblings_inside_a_branch_read_through_a_view(self):
        # Only the true branch of the outer cond holds the siblings.
        self._check(
            SiblingsInABranch().eval(), delegate_runs_the_conds=None, stock_wrong_for=("true",)
        )


class CopiesTest(absltest.TestCase):
    """Only a result read after another cond ran is copied."""

    def _copies(self, model):
        args = _inputs(PREDICATES["true"])
        with torch.no_grad():
            edge = to_edge(torch.export.export(model, args)).exported_program()
        return copy_sibling_cond_outputs(edge.graph_module)

    def test_the_first_result_only(self):
        self.assertEqual(self._copies(InsideTheDelegate()), 1)

    def test_none_for_a_single_cond(self):
        self.assertEqual(self._copies(OneCond()), 0)

    def test_a_viewed_result_even_of_a_single_cond(self):
        self.assertEqual(self._copies(ViewOfAResult()), 1)


if __name__ == "__main__":
    absltest.main()
