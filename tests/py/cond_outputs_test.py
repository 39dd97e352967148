"""``torch.cond`` results returned by a delegate are right on every call (``cond_outputs``).

A cond taken whole into the portable engine used to return stale values the first time each
branch ran (ExecuTorch's branch ``MoveCall`` replaced the output the engine had bound). Inputs
alternate between the branches so each branch's first run is checked, through
``executorch_trt.export``, against eager; a cross-attention cond that also returns a computed
tensor is checked the same way (its recompute branch runs once per utterance, always a first).
"""

import warnings

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
import executorch_trt.ops  # defines executorch::alias / update_cross_attn_cache

SHAPE = (1, 2, 4, 3)


class Pure(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 30, lambda x: x + x, lambda x: x + x + x, (x,))


class CacheAndComputed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(SHAPE))
        self.k = torch.nn.Linear(3, 3)

    def forward(self, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0], x + x

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(self.k(x), cache), x + x + x

        k, extra = torch.cond((self.k_cache != 0).any(), reuse, recompute, (self.k_cache, x))
        return k.sum(dim=2), extra


def _export(model, example):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return executorch_trt.export(torch.export.export(model, (example,)))


@delegate_library.needs_library
class CondOutputsTest(absltest.TestCase):
    def test_each_branch_is_right_on_its_first_run(self):
        from executorch_trt import runtime

        values = [1, 2, 3, 1, 1, 3, 2, 1]  # sum 24 * v: the true branch iff v >= 2
        xs = [torch.full(SHAPE, float(v)) for v in values]
        program = _export(Pure(), xs[0])
        method = runtime.load(program.buffer).load_method("forward")
        self.assertEqual(executorch_trt.inspect(program.buffer).method("forward").operators, {})
        for step, x in enumerate(xs):
            want = x + x if x.sum() > 30 else x + x + x
            torch.testing.assert_close(
                method.execute([x])[0], want, rtol=0, atol=0, msg=f"step {step}"
            )

    def test_a_computed_output_next_to_a_cache(self):
        from executorch_trt import runtime

        torch.manual_seed(0)
        model = CacheAndComputed().eval()
        xs = [torch.randn(SHAPE) for _ in range(3)]
        method = runtime.load(_export(model, xs[0]).buffer).load_method("forward")
        with torch.no_grad():
            k = model.k(xs[0])
        for step, x in enumerate(xs):
            got_k, got_extra = method.execute([x])
            torch.testing.assert_close(got_k, k.sum(dim=2), msg=f"step {step}")
            want_extra = x + x + x if step == 0 else x + x
            torch.testing.assert_close(got_extra, want_extra, rtol=0, atol=0, msg=f"step {step}")


if __name__ == "__main__":
    absltest.main()
