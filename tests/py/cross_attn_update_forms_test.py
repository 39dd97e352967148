"""ExecuTorch's own tests of ``executorch::update_cross_attn_cache``, run through the delegate.

Ported from ExecuTorch's ``extension/llm/custom_ops/test_update_cross_attn_cache.py``: the
update alone at several ``[B, H, S, D]`` shapes (S < S_max and S == S_max), the update in both
branches of a ``torch.cond``, and ``alias`` + update in one ``cond``. Upstream runs them with
``torch.compile``/``torch.export`` on caches passed as arguments; here each case is exported,
lowered with ``executorch_trt.export`` (or the composable path) and run by the delegate, with
upstream's expectations: the first S rows of each head are ``value``, the rest unchanged, the
result equals the cache.

Intended differences, each asserted below:
* The cache is a **buffer** (``register_buffer``): a cache passed as a method input is refused
  at export, in a ``cond`` or not, because the program would write a copy and the caller's
  tensor would never be written (eager writes it).
* The lowered op's result *is* the cache (in place, no copy); eager returns a copy.
* A ``cond`` whose reuse branch returns a tensor computed from the aliased cache
  (upstream's alias test) is refused, naming the buffer: the cache must be returned by both
  branches at one output.
"""

import os
import subprocess
import sys
import textwrap

import torch
from absl.testing import absltest
from executorch.exir import to_edge, to_edge_transform_and_lower

import delegate_library
import executorch_trt
import executorch_trt.ops  # defines executorch::alias / update_cross_attn_cache
from executorch_trt.lowering.partitioner import TensorRTPartitioner
from executorch_trt.passes.cross_attn_cache import expose_cross_attn_cache_writes

update = torch.ops.executorch.update_cross_attn_cache
alias = torch.ops.executorch.alias

#: (B, H, S_max, S, D): upstream's test_update_cross_attn_cache, _different_shapes and
#: _full_sequence cases.
SHAPES = [(2, 1, 4, 2, 4), (1, 2, 10, 5, 8), (4, 4, 8, 3, 16), (2, 1, 16, 10, 32), (2, 1, 4, 4, 4)]


class UpdateAlone(torch.nn.Module):
    def __init__(self, b, h, s_max, d):
        super().__init__()
        self.register_buffer("cache", torch.zeros(b, h, s_max, d))

    def forward(self, value):
        return update(value, self.cache)


class UpdateThenRead(UpdateAlone):
    """Reads the buffer after the update: eager sees the new rows."""

    def forward(self, value):
        out = update(value, self.cache)
        return out.sum() + self.cache.sum(dim=2)


class TwoUpdates(UpdateAlone):
    """Two updates of one cache: the first's result is a snapshot (eager returns a copy), the
    cache read between them and after them is the live buffer."""

    def forward(self, v1, v2):
        a = update(v1, self.cache)
        between = self.cache.sum()
        b = update(v2, self.cache)
        return between, self.cache.clone(), a, b


class ResultUnused(UpdateAlone):
    def forward(self, value):
        update(value, self.cache)
        return self.cache.sum(dim=2) * 1


class PrefillDecode(torch.nn.Module):
    """``prefill`` writes K through a projection; ``decode`` only reads the cache."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 2, 4, 3))
        self.k = torch.nn.Linear(3, 3)

    def prefill(self, x):
        return update(self.k(x), self.cache).sum()

    def decode(self, y):
        return (self.cache * y).sum(dim=(2, 3))


class _Method(torch.nn.Module):
    def __init__(self, model, name):
        super().__init__()
        self.model, self.name = model, name

    def forward(self, *args):
        return getattr(self.model, self.name)(*args)


class UpdateInBothBranches(torch.nn.Module):
    """Upstream's test_update_cross_attn_cache_in_cond / _export, the cache a buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 1, 4, 4))

    def forward(self, pred, v1, v2):
        def true_fn(v1, v2, cache):
            return update(v1, cache)

        def false_fn(v1, v2, cache):
            return update(v2, cache)

        return torch.cond(pred, true_fn, false_fn, (v1, v2, self.cache))


class UpdateOfAnInput(torch.nn.Module):
    def forward(self, v, c):
        return update(v, c)


class UpdateOfAnInputInCond(torch.nn.Module):
    """Upstream's test_update_cross_attn_cache_export as written: the cache an argument."""

    def forward(self, pred, v1, v2, c):
        def true_fn(v1, v2, cache):
            return update(v1, cache)

        def false_fn(v1, v2, cache):
            return update(v2, cache)

        return torch.cond(pred, true_fn, false_fn, (v1, v2, c))


class UpdateOfAView(UpdateAlone):
    def forward(self, value):
        return update(value, self.cache[:1])


class AliasPlusExtra(torch.nn.Module):
    """Upstream's test_alias_and_update_cross_attn_cache_with_cond_triton."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 1, 4, 4))

    def forward(self, pred, v, extra):
        def true_fn(v, extra_tensor, cache):
            aliased_cache, aliased_extra = alias(cache, extra_tensor)
            return aliased_cache + aliased_extra

        def false_fn(v, extra_tensor, cache):
            return update(v, cache)

        return torch.cond(pred, true_fn, false_fn, (v, extra, self.cache))


def _export(model, args, **kwargs):
    with torch.no_grad():
        return executorch_trt.export(torch.export.export(model, args, **kwargs))


@delegate_library.needs_library
class UpdateAloneTest(absltest.TestCase):
    def test_the_update_lands_in_the_callers_cache_at_every_shape(self):
        from executorch_trt import runtime

        for b, h, s_max, s, d in SHAPES:
            with self.subTest(B=b, H=h, S_max=s_max, S=s, D=d):
                torch.manual_seed(s_max + s)
                value = torch.randn(b, h, s, d)
                program = runtime.load(_export(UpdateAlone(b, h, s_max, d), (value,)).buffer)
                state = program.new_state()
                cache = state["cache"]
                ptr = cache.data_ptr()
                (out,) = program.load_method("forward").execute([value], state=state)
                # Upstream's expectations, on the caller's tensor: first S rows are value,
                # the rest zeros, and the result equals the cache.
                self.assertEqual(cache.data_ptr(), ptr)
                torch.testing.assert_close(cache[:, :, :s], value, rtol=0, atol=0)
                torch.testing.assert_close(cache[:, :, s:], torch.zeros(b, h, s_max - s, d))
                torch.testing.assert_close(out, cache, rtol=0, atol=0)

    def test_in_place_with_no_copy(self):
        program = _export(UpdateAlone(2, 1, 4, 4), (torch.randn(2, 1, 2, 4),))
        method = executorch_trt.inspect(program.buffer).method("forward")
        self.assertEqual(method.operators, {})
        (state,) = method.state
        self.assertEqual((state.name, state.update), ("cache", "in_place_delegate"))
        self.assertEqual(method.state_bytes_copied_per_call, 0)

    def test_a_dynamic_length_writes_only_its_rows(self):
        from executorch_trt import runtime

        s = torch.export.Dim("S", min=1, max=8)
        program = runtime.load(
            _export(
                UpdateAlone(1, 2, 8, 3), (torch.randn(1, 2, 5, 3),), dynamic_shapes=({2: s},)
            ).buffer
        )
        method = program.load_method("forward")
        eager = UpdateAlone(1, 2, 8, 3)
        torch.manual_seed(1)
        for rows in (5, 2, 8, 1):
            value = torch.randn(1, 2, rows, 3)
            (got,) = method.execute([value])
            want = update(value, eager.cache)
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"S={rows}")
            torch.testing.assert_close(program.buffer("cache"), eager.cache, rtol=0, atol=0)

    def test_a_read_after_the_update_sees_the_new_rows(self):
        from executorch_trt import runtime

        torch.manual_seed(2)
        value = torch.randn(1, 2, 3, 4)
        eager = UpdateThenRead(1, 2, 6, 4)
        want = eager(value)
        (got,) = (
            runtime.load(_export(UpdateThenRead(1, 2, 6, 4), (value,)).buffer)
            .load_method("forward")
            .execute([value])
        )
        torch.testing.assert_close(got, want)

    def test_two_updates_of_one_cache_keep_the_first_result(self):
        from executorch_trt import runtime

        v1 = torch.arange(1.0, 7.0).reshape(1, 1, 3, 2)
        v2 = torch.full((1, 1, 1, 2), -100.0)
        eager = TwoUpdates(1, 1, 4, 2)
        method = runtime.load(_export(TwoUpdates(1, 1, 4, 2), (v1, v2)).buffer).load_method(
            "forward"
        )
        for step in range(2):
            want = eager(v1, v2)
            got = method.execute([v1, v2])
            for name, g, w in zip(("between", "cache", "first result", "second result"), got, want):
                torch.testing.assert_close(g, w, rtol=0, atol=0, msg=f"step {step}: {name}")

    def test_a_result_read_after_the_next_update_is_a_copy(self):
        # The lowered result is the cache itself; where a later update may overwrite it in
        # place (e.g. in another partition), the first result must be read from a copy.
        v1, v2 = torch.ones(1, 1, 3, 2), torch.ones(1, 1, 1, 2)
        with torch.no_grad():
            ep = torch.export.export(TwoUpdates(1, 1, 4, 2), (v1, v2))
        expose_cross_attn_cache_writes(ep)
        outputs = ep.graph.output_node().args[0]
        first = outputs[-2]  # a, after the BUFFER_MUTATION output
        self.assertIs(first.target, torch.ops.aten.clone.default)
        self.assertIs(first.args[0].target, update.default)
        self.assertIs(outputs[-1].args[1], first.args[0], "the second update reads the first")

    def test_an_update_whose_result_is_unused_still_writes(self):
        from executorch_trt import runtime

        value = torch.ones(1, 1, 3, 2)
        (got,) = (
            runtime.load(_export(ResultUnused(1, 1, 4, 2), (value,)).buffer)
            .load_method("forward")
            .execute([value])
        )
        torch.testing.assert_close(got, ResultUnused(1, 1, 4, 2)(value))

    def test_the_update_persists_into_another_method(self):
        # prefill writes the cache, decode reads it: the write must not be lost (it was, as a
        # constant, before the update was exposed as a buffer mutation).
        from executorch_trt import runtime

        torch.manual_seed(3)
        model = PrefillDecode().eval()
        x, y = torch.randn(1, 2, 2, 3), torch.randn(1, 2, 4, 3)
        with torch.no_grad():
            eps = {
                name: torch.export.export(_Method(model, name), (a,))
                for name, a in (("prefill", x), ("decode", y))
            }
            program = runtime.load(executorch_trt.export(eps).buffer)
            want_prefill = model.prefill(x)
            want_decode = model.decode(y)
        (got_prefill,) = program.load_method("prefill").execute([x])
        (got_decode,) = program.load_method("decode").execute([y])
        torch.testing.assert_close(got_prefill, want_prefill)
        torch.testing.assert_close(got_decode, want_decode)
        self.assertGreater(want_decode.abs().sum().item(), 0)

    def test_the_composable_and_plain_paths_agree(self):
        from executorch_trt import runtime

        torch.manual_seed(4)
        value = torch.randn(2, 1, 2, 4)
        want = update(value, torch.zeros(2, 1, 4, 4))
        with torch.no_grad():
            # No expose call: the partitioner records the write before decomposition.
            ep = torch.export.export(UpdateAlone(2, 1, 4, 4), (value,))
            composable = to_edge_transform_and_lower(
                ep, partitioner=[TensorRTPartitioner()]
            ).to_executorch(executorch_trt.backend_config())
            ep = torch.export.export(UpdateAlone(2, 1, 4, 4), (value,))
            expose_cross_attn_cache_writes(ep)
            plain = to_edge(ep).to_executorch(executorch_trt.backend_config())
        for name, program in (("composable", composable), ("plain", plain)):
            with self.subTest(path=name):
                loaded = runtime.load(program.buffer)
                (got,) = loaded.load_method("forward").execute([value])
                torch.testing.assert_close(got, want, rtol=0, atol=0)
                torch.testing.assert_close(loaded.buffer("cache"), want, rtol=0, atol=0)

    def test_the_paths_that_skip_the_expose_step_are_refused(self):
        # to_edge + to_backend never calls the partitioner's pre-decomposition step.
        for model in (UpdateAlone(2, 1, 4, 4), ResultUnused(2, 1, 4, 4)):
            with self.subTest(model=type(model).__name__):
                with torch.no_grad():
                    ep = torch.export.export(model, (torch.randn(2, 1, 2, 4),))
                with self.assertRaisesRegex(
                    ValueError,
                    r"TensorRTPartitioner: "
                    r"update_cross_attn_cache updates cross-attention "
                    r"cache\(s\) 'cache'",
                ):
                    to_edge(ep).to_backend(TensorRTPartitioner())
                with torch.no_grad():
                    ep = torch.export.export(model, (torch.randn(2, 1, 2, 4),))
                with self.assertRaisesRegex(
                    ValueError,
                    r"method #0: update_cross_attn_cache "
                    r"updates cross-attention cache\(s\) 'cache'",
                ):
                    to_edge(ep).to_executorch(executorch_trt.backend_config())


class UnusedResultTest(absltest.TestCase):
    def test_an_unused_update_is_refused_in_a_fresh_process(self):
        # to_edge drops an op whose result is unused as dead code, unless the op is known to
        # have a side effect (cross_attn_ops registers it). In a process that has exported
        # other programs first, that can hold without the registration, so this runs alone.
        script = textwrap.dedent("""
            import torch
            import executorch_trt
            from executorch.exir import to_edge, to_edge_transform_and_lower
            from executorch_trt.lowering.partitioner import TensorRTPartitioner
            from cross_attn_update_forms_test import ResultUnused
            for path in ("to_backend", "plain"):
                with torch.no_grad():
                    ep = torch.export.export(ResultUnused(2, 1, 4, 4),
                                             (torch.randn(2, 1, 2, 4),))
                try:
                    if path == "to_backend":
                        to_edge(ep).to_backend(TensorRTPartitioner())
                    else:
                        to_edge(ep).to_executorch(executorch_trt.backend_config())
                    print(path, "exported")
                except ValueError as e:
                    print(path, "refused:", str(e).splitlines()[0][:160])
            """)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        run = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
        )
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        for path in ("to_backend", "plain"):
            self.assertRegex(
                run.stdout,
                rf"{path} refused:.*update_cross_attn_cache updates "
                r"cross-attention cache\(s\) 'cache'",
            )


@delegate_library.needs_library
class UpdateInCondTest(absltest.TestCase):
    def test_each_branch_writes_its_value(self):
        from executorch_trt import runtime

        torch.manual_seed(5)
        v1, v2 = torch.randn(2, 1, 2, 4), torch.randn(2, 1, 2, 4)
        program = _export(UpdateInBothBranches(), (torch.tensor(True), v1, v2))
        for pred, want in ((True, v1), (False, v2)):
            with self.subTest(pred=pred):
                loaded = runtime.load(program.buffer)
                loaded.load_method("forward").execute([torch.tensor(pred), v1, v2])
                cache = loaded.buffer("cache")
                torch.testing.assert_close(cache[:, :, :2], want, rtol=0, atol=0)
                torch.testing.assert_close(cache[:, :, 2:], torch.zeros(2, 1, 2, 4))


class RefusedFormsTest(absltest.TestCase):
    def _refused(self, model, args, pattern):
        with torch.no_grad():
            ep = torch.export.export(model, args)
        with self.assertRaisesRegex(ValueError, pattern), torch.no_grad():
            executorch_trt.export(ep)

    def test_a_cache_passed_as_a_method_input(self):
        v, c = torch.randn(2, 1, 2, 4), torch.zeros(2, 1, 4, 4)
        self._refused(
            UpdateOfAnInput(),
            (v, c),
            r"outside a torch.cond\) updates method input 'c'.*register_buffer",
        )
        self._refused(
            UpdateOfAnInputInCond(),
            (torch.tensor(True), v, v, c),
            r"torch.cond 'cond' updates method input 'c'.*register_buffer",
        )

    def test_a_view_of_a_buffer(self):
        self._refused(
            UpdateOfAView(2, 1, 4, 4),
            (torch.randn(1, 1, 2, 4),),
            r"writes 'slice_1', a view \(aten::slice\) of another tensor",
        )

    def test_a_reuse_branch_that_computes_from_the_alias_names_the_buffer(self):
        self._refused(
            AliasPlusExtra(),
            (torch.tensor(True), torch.randn(2, 1, 2, 4), torch.randn(2, 1, 4, 4)),
            r"output 0 is a tensor computed by aten::add in the true branch and "
            r"buffer 'cache' in the false branch.*k = torch.cond",
        )


if __name__ == "__main__":
    absltest.main()
