"""Cross-attention caches under ``torch.cond``: written once, in place.

A two-layer toy model whose layers each hold a zero ``k_cache`` buffer [1, 2, 4, 3] and
compute ``torch.cond((k_cache != 0).any(), alias, update_cross_attn_cache(k(x)))``. Step 0
recomputes each layer's K from x; later steps (other x) must reuse it. Checked against a
reference written without ``cond`` (eager ``executorch::alias`` trips PyTorch's aliasing
check), through ``executorch_trt.export`` (the whole cond inside the delegate), through the
composable path (no explicit expose call: ``to_edge_transform_and_lower`` with
``TensorRTPartitioner`` records the writes) and through plain ``to_edge`` +
``executorch_trt.backend_config()`` (no delegate), loading from bytes and from a file: outputs equal
at every step, the caches are mutable buffers (no constant, no copy per call), the two layers do not
see each other's K (ExecuTorch #21490's shared branch arena), the recompute branch runs only while a
cache is zero (``runtime.cross_attn_cache_updates``), and zeroing is what starts a new utterance (a
fresh load recomputes).
"""

import os
import tempfile

import torch
from absl.testing import absltest
from executorch.exir import to_edge, to_edge_transform_and_lower

import delegate_library
import executorch_trt
import executorch_trt.ops  # defines executorch::alias / update_cross_attn_cache
from executorch_trt.lowering.partitioner import TensorRTPartitioner
from executorch_trt.passes.cross_attn_cache import expose_cross_attn_cache_writes

SHAPE = (1, 2, 4, 3)


class Layer(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(SHAPE))
        self.k = torch.nn.Linear(3, 3)
        torch.nn.init.constant_(self.k.weight, 0.1 * (i + 1))
        torch.nn.init.constant_(self.k.bias, i + 1.0)

    def forward(self, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0]

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(self.k(x), cache)

        return torch.cond((self.k_cache != 0).any(), reuse, recompute, (self.k_cache, x))


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(i) for i in range(2))

    def forward(self, x):
        return tuple(layer(x).sum(dim=2) for layer in self.layers)


def reference(model, xs):
    """Per step, the outputs the cond model must give: K computed from the first x, reused."""
    caches = [torch.zeros(SHAPE) for _ in model.layers]
    steps = []
    for x in xs:
        outs = []
        for layer, cache in zip(model.layers, caches):
            if not (cache != 0).any():
                cache.copy_(layer.k(x))
            outs.append(cache.sum(dim=2))
        steps.append(outs)
    return steps


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(SHAPE) for _ in range(3)]


@delegate_library.needs_library
class CrossAttnCacheTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = TwoLayers().eval()
        cls.xs = _inputs()
        with torch.no_grad():
            cls.want = reference(cls.model, cls.xs)
            ep = torch.export.export(cls.model, (cls.xs[0],))
            cls.delegated = executorch_trt.export(ep, emit_mutable_buffer_names=True)
            plain = torch.export.export(cls.model, (cls.xs[0],))
            cls.exposed = expose_cross_attn_cache_writes(plain)
            cls.plain = to_edge(plain).to_executorch(
                executorch_trt.backend_config(emit_mutable_buffer_names=True)
            )
            # The composable path needs no expose call: the partitioner makes it.
            composable = torch.export.export(cls.model, (cls.xs[0],))
            cls.composable = to_edge_transform_and_lower(
                composable, partitioner=[TensorRTPartitioner()]
            ).to_executorch(executorch_trt.backend_config(emit_mutable_buffer_names=True))

    PROGRAMS = ("delegated", "composable", "plain")

    def _run(self, program, loader):
        from executorch_trt import runtime

        if loader == "bytes":
            return self._steps(runtime.load(program.buffer))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.pte")
            with open(path, "wb") as f:
                f.write(program.buffer)
            return self._steps(runtime.load(path))

    def _steps(self, loaded):
        from executorch_trt import runtime

        method = loaded.load_method("forward")
        outputs, self.recomputes = [], []
        for x in self.xs:
            before = runtime.cross_attn_cache_updates()
            outputs.append(method.execute([x]))
            self.recomputes.append(runtime.cross_attn_cache_updates() - before)
        return outputs

    def test_the_pass_exposes_both_caches(self):
        self.assertEqual(sorted(self.exposed), ["layers.0.k_cache", "layers.1.k_cache"])

    def test_written_once_and_reused_in_both_layers(self):
        for name in self.PROGRAMS:
            for loader in ("bytes", "file"):
                with self.subTest(program=name, loader=loader):
                    got = self._run(getattr(self, name), loader)
                    for step, (g, w) in enumerate(zip(got, self.want)):
                        for layer in range(2):
                            torch.testing.assert_close(
                                g[layer], w[layer], rtol=1e-6, atol=1e-6, msg=f"step {step} {layer}"
                            )
                    # Step 0 runs both layers' recompute branch; later steps run neither.
                    self.assertEqual(self.recomputes, [2, 0, 0])

    def test_the_delegate_takes_the_whole_cond(self):
        for name in ("delegated", "composable"):
            with self.subTest(program=name):
                method = executorch_trt.inspect(getattr(self, name).buffer).method("forward")
                # Predicate, cond and both branches run inside the one delegate call ...
                self.assertEqual(method.operators, {})
                (delegate,) = method.delegates
                self.assertEqual(delegate.engine, "portable")
                # ... which returns each layer's cache as an output aliased to its input.
                self.assertEqual(delegate.aliased_outputs, 2)
                self.assertEqual({s.update for s in method.state}, {"in_place_delegate"})

    def test_caches_are_state_updated_in_place(self):
        for name in self.PROGRAMS:
            with self.subTest(program=name):
                method = executorch_trt.inspect(getattr(self, name).buffer).method("forward")
                self.assertEqual(
                    sorted(s.name for s in method.state), ["layers.0.k_cache", "layers.1.k_cache"]
                )
                self.assertEqual(method.state_bytes_copied_per_call, 0)
                # The reuse branch no longer copies the cache (alias.out is gone) and nothing
                # writes a cache back.
                self.assertNotIn("executorch::alias.out", method.operators)
                self.assertNotIn("aten::copy_", method.operators)

    def test_a_fresh_load_starts_a_new_utterance(self):
        from executorch_trt import runtime

        method = runtime.load(self.plain.buffer).load_method("forward")
        first = method.execute([self.xs[1]])  # a fresh load: zero caches, so x1 is used
        model = self.model
        for layer in range(2):
            torch.testing.assert_close(
                first[layer], model.layers[layer].k(self.xs[1]).sum(dim=2), rtol=1e-6, atol=1e-6
            )


class _ClonesInsteadOfAlias(Layer):
    def forward(self, x):
        def reuse(cache, x):
            return cache.clone()

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(self.k(x), cache)

        return torch.cond((self.k_cache != 0).any(), reuse, recompute, (self.k_cache, x))


class _CacheAsInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = torch.nn.Linear(3, 3)

    def forward(self, cache, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0]

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(self.k(x), cache)

        return torch.cond((cache != 0).any(), reuse, recompute, (cache, x))


class _CacheAlsoReadOutside(Layer):
    """Reads its cache with ``aten::flip``, which the portable engine does not take."""

    def forward(self, x):
        return super().forward(x)[0] + self.k_cache.flip(0)


def _edge(model):
    ep = torch.export.export(model, (torch.randn(SHAPE),))
    expose_cross_attn_cache_writes(ep)
    return to_edge(ep).exported_program()


class _BranchWithAnOpTheEngineLacks(Layer):
    """Its recompute branch has a linear and ``expm1`` (not a portable-engine op), so the cond
    stays outside the delegate."""

    def forward(self, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0]

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(torch.expm1(self.k(x)), cache)

        return torch.cond((self.k_cache != 0).any(), reuse, recompute, (self.k_cache, x))


class PartitionTest(absltest.TestCase):
    def test_a_cond_left_outside_the_delegate_still_runs_its_linear(self):
        # The partitioner keeps aten.linear whole only at the top level; a branch linear kept
        # whole would fail lowering when the cond is not delegated ("was not decomposed or
        # delegated").
        from executorch_trt import runtime

        model = _BranchWithAnOpTheEngineLacks(0).eval()
        xs = _inputs()
        with torch.no_grad():
            program = executorch_trt.export(torch.export.export(model, (xs[0],)))
            want = torch.expm1(model.k(xs[0]))
        method = runtime.load(program.buffer).load_method("forward")
        for step, x in enumerate(xs):
            torch.testing.assert_close(method.execute([x])[0], want, msg=f"step {step}")

    def test_the_tensorrt_engine_leaves_the_cond_to_executorch(self):
        # TensorRT cannot write into an input binding, so its engine claims no cond; the cond
        # then runs above the delegate, planned in place by InplaceMemoryPlanningPass.
        with torch.no_grad():
            ep = _edge(Layer(0))
        TensorRTPartitioner(engine="tensorrt").partition(ep)
        conds = [n for n in ep.graph.nodes if n.target is torch.ops.higher_order.cond]
        self.assertEqual(len(conds), 1)
        self.assertNotIn("delegation_tag", conds[0].meta)

    def test_the_portable_engine_tags_cond_predicate_and_branches_together(self):
        with torch.no_grad():
            ep = _edge(Layer(0))
        TensorRTPartitioner().partition(ep)
        (cond,) = [n for n in ep.graph.nodes if n.target is torch.ops.higher_order.cond]
        tag = cond.meta["delegation_tag"]
        pred, true_branch, false_branch = cond.args[:3]
        for node in (pred, true_branch, false_branch, *cond.users):
            self.assertEqual(node.meta.get("delegation_tag"), tag, node.name)
        # The cache itself stays above the delegate (caller-owned state).
        self.assertNotIn("delegation_tag", cond.args[3][0].meta)

    def test_a_cache_also_read_outside_the_delegate_is_rejected(self):
        with torch.no_grad():
            ep = _edge(_CacheAlsoReadOutside(0))
        with self.assertRaisesRegex(
            ValueError,
            r"cache 'b_k_cache'.*also read by "
            r"aten::flip.*Read the cache only through the cond",
        ):
            TensorRTPartitioner().partition(ep)


class _SlicedCache(Layer):
    def forward(self, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0]

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(
                self.k(x)[:, :, :2].contiguous(), cache
            )

        cache = self.k_cache[:, :, :2]
        return torch.cond((cache != 0).any(), reuse, recompute, (cache, x))


class _ParameterCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k_cache = torch.nn.Parameter(torch.zeros(SHAPE), requires_grad=False)
        self.k = torch.nn.Linear(3, 3)

    def forward(self, x):
        return Layer.forward(self, x)


class _NestedCond(Layer):
    def forward(self, x):
        def reuse(cache, x):
            return torch.ops.executorch.alias(cache, x)[0]

        def recompute(cache, x):
            return torch.ops.executorch.update_cross_attn_cache(self.k(x), cache)

        def outer_true(cache, x):
            return torch.cond((cache != 0).any(), reuse, recompute, (cache, x))

        def outer_false(cache, x):
            return cache + x

        return torch.cond(x.sum() > 0, outer_true, outer_false, (self.k_cache, x))


class MisuseTest(absltest.TestCase):
    def _export_error(self, model, pattern):
        with torch.no_grad():
            ep = torch.export.export(model, (torch.randn(SHAPE),))
            with self.assertRaisesRegex(ValueError, pattern):
                executorch_trt.export(ep)

    def test_a_cache_that_is_not_a_buffer_is_rejected(self):
        self._export_error(
            _SlicedCache(0),
            r"'slice_1' is a computed tensor \(aten::slice.*"
            r"not a buffer.*register_buffer",
        )
        self._export_error(_ParameterCache(), r"'p_k_cache' is a parameter, not a buffer")

    def test_an_update_in_a_nested_cond_is_rejected(self):
        self._export_error(
            _NestedCond(0),
            r"a torch.cond inside a branch of torch.cond "
            r"'cond' updates a cross-attention cache",
        )

    def test_the_paths_that_skip_the_expose_step_are_rejected(self):
        # to_edge + to_backend never calls the partitioner's pre-decomposition step, which
        # records the cache writes: the caches would be constants (wrong numbers with two
        # layers). Both the partitioner and the planner say what to do.
        with torch.no_grad():
            ep = torch.export.export(TwoLayers(), (torch.randn(SHAPE),))
        with self.assertRaisesRegex(
            ValueError,
            r"TensorRTPartitioner: update_cross_attn_cache updates "
            r"cross-attention cache\(s\) 'layers.0.k_cache', "
            r"'layers.1.k_cache'.*to_edge_transform_and_lower.*"
            r"expose_cross_attn_cache_writes",
        ):
            to_edge(ep).to_backend(TensorRTPartitioner())
        with torch.no_grad():
            ep = torch.export.export(TwoLayers(), (torch.randn(SHAPE),))
        with self.assertRaisesRegex(
            ValueError,
            r"method #0: update_cross_attn_cache updates .*"
            r"expose_cross_attn_cache_writes",
        ):
            to_edge(ep).to_executorch(executorch_trt.backend_config())

    def test_a_cache_passed_as_method_input_is_rejected(self):
        with torch.no_grad():
            ep = torch.export.export(_CacheAsInput(), (torch.zeros(SHAPE), torch.randn(SHAPE)))
            with self.assertRaisesRegex(
                ValueError, r"updates method input 'cache'.*register_buffer"
            ):
                executorch_trt.export(ep)

    def test_a_reuse_branch_that_copies_is_rejected_with_how_to_fix_it(self):
        with torch.no_grad():
            ep = torch.export.export(_ClonesInsteadOfAlias(0), (torch.randn(SHAPE),))
            with self.assertRaisesRegex(
                ValueError,
                r"output 0 is a tensor computed by "
                r"aten::clone in the true branch and buffer "
                r"'k_cache' in the false branch.*alias",
            ):
                executorch_trt.export(ep)


if __name__ == "__main__":
    absltest.main()
