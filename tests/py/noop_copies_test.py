"""``DropNoOpCopiesPass``: which copies it drops and which it keeps, on real
edge graphs, with values checked against eager PyTorch; and end to end through the delegate
(a snapshot of a cache taken before its in-place write must survive)."""

import collections
import copy

import torch
from absl.testing import absltest
from executorch.exir import EdgeCompileConfig, to_edge

import executorch_trt
from executorch_trt import runtime
from executorch_trt.graph.operator_support import schema_name
from executorch_trt.passes.noop_copies import DropNoOpCopiesPass, is_noop_copy


def _edge(module, *args):
    with torch.no_grad():
        ep = torch.export.export(module, args, strict=False)
        return to_edge(
            ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)
        ).exported_program()


def _ops(gm):
    return collections.Counter(schema_name(n) for n in gm.graph.nodes if n.op == "call_function")


class NoOps(torch.nn.Module):
    """Five copies that change nothing, around real compute."""

    def forward(self, x):  # x [2, 3, 4] float32
        a = x.expand(2, 3, 4) * 2.0  # expand_copy to its own shape
        b = x.clone() + 1.0  # _clone_dim_order, same dim order
        c = x.to(torch.float32) - 1.0  # no-op dtype conversion (dropped
        d = x.reshape(2, 3, 4) / 3.0  # at export or here)
        e = x[:, :, 0:4].exp()  # full-range slice (alias_copy)
        return a + b + c + d + e


class RealCopies(torch.nn.Module):
    """Copies that look alike but change the value: never dropped."""

    def forward(self, x, y):  # x [4, 4, 4] float32, y [1, 4] float32
        p = x.permute(0, 2, 1)  # same shape, elements moved
        q = x.to(torch.float16).to(torch.float32)  # dtype round trip: a real rounding
        r = y.expand(3, 4)  # a real broadcast
        s = x.unsqueeze(0).to(memory_format=torch.channels_last)  # dim order change
        return p + q, r * 2.0, s * 2.0


class SnapshotBeforeWrite(torch.nn.Module):
    """Reads a snapshot of the cache taken before its in-place write, and returns a clone of
    an input (a partition output): both copies must stay."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 6, 4))

    def forward(self, v, pos):  # v [1, 1, 4] float32, pos [1] int64
        old = self.cache.clone()
        self.cache.index_copy_(1, pos, v * 2.0)
        return (old * 3.0).sum(1) + self.cache.sum(1), v.clone()


class DropNoOpCopiesPassTest(absltest.TestCase):
    def test_drops_copies_that_change_nothing(self):
        x = torch.randn(2, 3, 4)
        ep = _edge(NoOps(), x)
        before = _ops(ep.graph_module)
        self.assertEqual(
            sum(
                before[n]
                for n in (
                    "aten::expand_copy",
                    "aten::view_copy",
                    "aten::alias_copy",
                    "dim_order_ops::_clone_dim_order",
                )
            ),
            4,
            before,
        )
        expected = ep.module()(x)
        result = DropNoOpCopiesPass()(ep.graph_module)
        self.assertTrue(result.modified)
        after = _ops(result.graph_module)
        for name in (
            "aten::expand_copy",
            "aten::slice_copy",
            "aten::view_copy",
            "aten::alias_copy",
            "dim_order_ops::_clone_dim_order",
            "dim_order_ops::_to_dim_order_copy",
        ):
            self.assertEqual(after[name], 0, (name, after))
        torch.testing.assert_close(ep.module()(x), expected, rtol=0, atol=0)
        torch.testing.assert_close(ep.module()(x), NoOps()(x), rtol=0, atol=0)

    def test_keeps_copies_that_change_the_value(self):
        x, y = torch.randn(4, 4, 4), torch.randn(1, 4)
        ep = _edge(RealCopies(), x, y)
        before = _ops(ep.graph_module)
        self.assertFalse(any(is_noop_copy(n) for n in ep.graph_module.graph.nodes))
        result = DropNoOpCopiesPass()(ep.graph_module)
        self.assertFalse(result.modified)
        self.assertEqual(_ops(result.graph_module), before)
        for got, want in zip(ep.module()(x, y), RealCopies()(x, y)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)

    def test_delegate_keeps_snapshot_of_written_cache_and_output_copy(self):
        model = SnapshotBeforeWrite().eval()
        eager = copy.deepcopy(model)
        v, pos = torch.randn(1, 1, 4), torch.tensor([0])
        with torch.no_grad():
            et = executorch_trt.export(torch.export.export(model, (v, pos)))
        method = runtime.load(et.buffer).load_method("forward")
        for step in range(4):
            v, pos = torch.randn(1, 1, 4), torch.tensor([step])
            with torch.no_grad():
                want = eager(v, pos)
            got = method.execute([v, pos])
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6, msg=f"step {step}")


if __name__ == "__main__":
    absltest.main()
