"""Rejections at export: dynamic shapes, caches passed as method inputs and buffers updated
under an input's name, on ``executorch_trt.export`` (method named, before lowering) and on the
composable ``to_edge_transform_and_lower(..., partitioner=[TensorRTPartitioner()])`` path; and
the graph scan that finds what a non-functional ``torch.export`` program mutates
(``executorch_trt.graph.mutations``), checked against ``run_decompositions``."""

import torch
from absl.testing import absltest, parameterized
from executorch.exir import to_edge, to_edge_transform_and_lower

import delegate_library
import executorch_trt
import lowering_utils as lu
from executorch_trt import runtime
from executorch_trt.backend.bindings import _binding
from executorch_trt.graph.mutations import mutated_inputs

_WHAT_TO_DO = (
    r"The delegate takes a dynamic dimension when it is a torch\.export\.Dim with a "
    r"finite max.*static shapes"
)


class Affine(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1


class PrefixWrite(torch.nn.Module):
    """``self.cache[:N, pos] = k`` with ``N = k.shape[0]``: with ``N`` dynamic, a symbolic int
    (``sym_size``) reaches the partition."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(8, 6, 4))

    def forward(self, k, pos):
        n = k.shape[0]
        self.cache[:n, pos] = k
        return self.cache.sum(1) * 2


class Scale(torch.nn.Module):
    def forward(self, x, n: int):
        return x * n


def _export_affine(dim):
    return torch.export.export(Affine(), (torch.randn(4, 8),), dynamic_shapes={"x": {0: dim}})


def _export_prefix_write_dynamic():
    with torch.no_grad():
        return torch.export.export(
            PrefixWrite(),
            (torch.ones(2, 1, 4), torch.tensor([1])),
            dynamic_shapes={"k": {0: torch.export.Dim("n", min=1, max=8)}, "pos": None},
        )


class Doubled(torch.nn.Module):
    """``cat([x, x])``: an output dimension ``2*n`` that is no input's dimension."""

    def forward(self, x):
        return torch.cat([x, x]) * 2


def _lower(ep):
    with torch.no_grad():
        return to_edge_transform_and_lower(ep, partitioner=[executorch_trt.TensorRTPartitioner()])


class DynamicShapesTest(absltest.TestCase):
    """What the delegate cannot bind is rejected before lowering, naming the method, input,
    dimension, symbol and range (``dynamic_shapes``); what it can bind exports and runs
    (``dynamic_shapes_test`` runs a decoder's prefill at every length)."""

    def test_export_rejects_a_dimension_without_a_max(self):
        static = torch.export.export(Affine(), (torch.randn(4, 8),))
        with self.assertRaisesRegex(
            ValueError,
            r"executorch_trt: method 'decode': input 'x' dimension 0 is "
            r"s\d+ \(s\d+ in \[\d, inf\]\), without a finite upper bound, in "
            r"shape \[s\d+, 8\]\. " + _WHAT_TO_DO,
        ):
            executorch_trt.export(
                {"prefill": static, "decode": _export_affine(torch.export.Dim("batch"))}
            )

    def test_composable_path_rejects_a_dimension_without_a_max(self):
        # The partitioner's pre-decomposition step refuses, naming the method it was given
        # (or by position), as executorch_trt.export does.
        static = torch.export.export(Affine(), (torch.randn(4, 8),))
        programs = {"prefill": static, "decode": _export_affine(torch.export.Dim("batch"))}
        for partitioner, method in (
            (executorch_trt.TensorRTPartitioner(), "method #2"),
            (executorch_trt.TensorRTPartitioner(method_names=["prefill", "decode"]), "decode"),
        ):
            with self.assertRaisesRegex(
                ValueError,
                rf"executorch_trt: method '{method}': input 'x' dimension 0 is "
                r"s\d+ .*without a finite upper bound.*" + _WHAT_TO_DO,
            ):
                to_edge_transform_and_lower(programs, partitioner=[partitioner])

    def test_a_reloaded_program_keeps_its_declared_minimum(self):
        # torch.export.load gives a program whose shape environment tracks no inputs; its
        # Dim(min=1) must still reach the delegate, or every decode step (T = 1) is refused.
        import copy
        import io

        import decoder_models as dm
        from executorch_trt import runtime

        decoder = dm.TinyDecoder()
        length = torch.export.Dim("T", min=1, max=decoder.max_seq)
        with torch.no_grad():
            ep = torch.export.export(
                dm.Step(decoder),
                (torch.zeros(1, 3, dtype=torch.long), torch.arange(3)),
                dynamic_shapes={"tokens": {1: length}, "pos": {0: length}},
            )
        buffer = io.BytesIO()
        torch.export.save(ep, buffer)
        calls = [
            (torch.tensor([[1, 2, 3]]), torch.arange(3)),
            (torch.tensor([[5]]), torch.tensor([3])),
            (torch.tensor([[6]]), torch.tensor([4])),
        ]
        for path in ("export", "composable"):
            buffer.seek(0)
            loaded = torch.export.load(buffer)
            et = (
                executorch_trt.export(loaded)
                if path == "export"
                else _lower(loaded).to_executorch(executorch_trt.backend_config())
            )
            method = runtime.load(et.buffer).load_method("forward")
            eager = dm.Step(copy.deepcopy(decoder))
            for k, (tokens, pos) in enumerate(calls):
                (got,) = method.execute([tokens, pos])
                with torch.no_grad():
                    torch.testing.assert_close(
                        got, eager(tokens, pos), atol=1e-4, rtol=1e-4, msg=f"{path}: call {k}"
                    )

    def test_a_partitioner_used_again_after_a_refusal_starts_clean(self):
        # The refusal comes at the second method, after the first was recorded.
        partitioner = executorch_trt.TensorRTPartitioner()
        with self.assertRaisesRegex(ValueError, r"without a finite upper bound"):
            to_edge_transform_and_lower(
                {
                    "a": torch.export.export(Affine(), (torch.randn(4, 8),)),
                    "b": _export_affine(torch.export.Dim("batch")),
                },
                partitioner=[partitioner],
            )
        good = _export_affine(torch.export.Dim("T", min=1, max=8))
        edge = to_edge_transform_and_lower(good, partitioner=[partitioner])
        self.assertEqual(len(lu.delegate_calls(edge.exported_program().graph_module)), 1)
        self.assertEqual(partitioner._lowering.keys(), {"forward"})

    def test_export_rejects_an_expression_dimension(self):
        ep = _export_affine(2 * torch.export.Dim("h", min=1, max=8))
        with self.assertRaisesRegex(
            ValueError,
            r"method 'forward': input 'x' dimension 0 is 2\*s\d+ .*an expression "
            r"of dynamic sizes, in shape \[2\*s\d+, 8\]\. " + _WHAT_TO_DO,
        ):
            executorch_trt.export(ep)

    def test_export_rejects_a_symbolic_int_input(self):
        ep = torch.export.export(
            Scale(), (torch.ones(3), 4), dynamic_shapes={"x": None, "n": torch.export.Dim.DYNAMIC}
        )
        with self.assertRaisesRegex(
            ValueError,
            r"method 'forward': input 'n' is a symbolic int "
            r"\(s\d+ in \[0, inf\]\).*" + _WHAT_TO_DO,
        ):
            executorch_trt.export(ep)

    def test_partitioner_rejects_an_output_size_no_input_carries(self):
        ep = torch.export.export(
            Doubled(),
            (torch.randn(2, 4),),
            dynamic_shapes={"x": {0: torch.export.Dim("n", min=1, max=8)}},
        )
        with self.assertRaisesRegex(
            ValueError,
            r"TensorRTPartitioner: delegate output '\w+' is a tensor of shape "
            r"\[2\*s\d+, 4\] \(s\d+ in \[\d, 8\] = dimension 0 of input "
            r"'x'\)\. " + _WHAT_TO_DO,
        ):
            _lower(ep)

    def test_a_size_used_inside_the_partition_stays_inside(self):
        # self.cache[:n, pos] = k with n = k.shape[0] dynamic: sym_size and what uses it are
        # taken together (op_groups.SYMBOLIC), so no symbolic int crosses the boundary.
        gm, call = lu.lower_single_delegate(_export_prefix_write_dynamic())
        blob = lu.blob_of(gm, call)
        (symbol,) = blob.metadata.symbols
        # The declared range (min 1), though to_edge's recomputed range starts at 2.
        self.assertEqual((symbol.min, symbol.max), (1, 8))
        self.assertEqual({b.name: b.shape for b in blob.metadata.inputs}["k"], (symbol.name, 1, 4))
        # executorch_trt.export gives the same range.
        et = executorch_trt.export(_export_prefix_write_dynamic())
        gm = et.exported_program().graph_module
        (call,) = lu.delegate_calls(gm)
        (symbol,) = lu.blob_of(gm, call).metadata.symbols
        self.assertEqual((symbol.min, symbol.max), (1, 8))

    def test_binding_messages_name_the_dimension(self):
        # preprocess' own check (backend.bindings._binding), for programs partitioned by other
        # means.
        ep = _export_prefix_write_dynamic()
        nodes = {n.name: n for n in ep.graph.nodes}
        (size,) = [n for n in ep.graph.nodes if n.name.startswith("sym_size")]
        with self.assertRaisesRegex(
            ValueError,
            rf"binding '{size.name}' is a symbolic int \(s\d+ = dimension 0 of "
            r"input 'k'\), i\.e\. a dynamic size passed into the delegate\. " + _WHAT_TO_DO,
        ):
            _binding(size.name, size, {}, {})
        symbols = {}
        binding = _binding("k", nodes["k"], symbols, {})
        (symbol,) = symbols.values()
        self.assertEqual(binding.shape, (symbol.name, 1, 4))
        self.assertEqual((symbol.min, symbol.max, symbol.opt), (2, 8, 2))  # the shape env's
        symbols = {}
        _binding("k", nodes["k"], symbols, {symbol.name: (1, 8)})
        self.assertEqual(symbols[symbol.name].min, 1)


class UserCache(torch.nn.Module):
    """``forward(cache, x, pos)`` with ``cache.index_copy_(1, pos, proj(x))``: a cache passed as
    a method input and mutated."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, cache, x, pos):
        cache.index_copy_(1, pos, self.proj(x))
        return cache.sum(1) * 2


class UserCacheSliceWrite(UserCache):
    def forward(self, cache, x, pos):
        cache[:, pos] = self.proj(x)
        return cache.sum(1) * 2


class UserCacheReadOnly(UserCache):
    def forward(self, cache, x, pos):
        return cache.index_copy(1, pos, self.proj(x)).sum(1) * 2


def _user_cache_args():
    return torch.zeros(1, 6, 4), torch.ones(1, 1, 4), torch.tensor([1])


_REGISTER_BUFFER = (
    r"Register the cache as a buffer of the module instead "
    r"\(self\.register_buffer\('cache', torch\.zeros\(\.\.\.\)\).*program owns "
    r"it.*alloc_mutable_buffers=False and emit_mutable_buffer_names=True and bind "
    r"the buffer by name"
)


class MutatedUserInputTest(parameterized.TestCase):
    @parameterized.parameters(UserCache, UserCacheSliceWrite)
    def test_export_rejects_naming_method_and_input(self, cls):
        with torch.no_grad():
            ep = torch.export.export(cls(), _user_cache_args())
        with self.assertRaisesRegex(
            ValueError,
            r"executorch_trt: method 'step' mutates input 'cache' \(written by "
            r"aten::index_(copy|put)_\)\. A tensor passed as a method input and "
            r"updated in place .*extra output and leave the caller's tensor "
            r"unchanged\. " + _REGISTER_BUFFER,
        ):
            executorch_trt.export({"step": ep})

    def test_partitioner_rejects_on_the_composable_path(self):
        with torch.no_grad():
            ep = torch.export.export(UserCache(), _user_cache_args())
        with self.assertRaisesRegex(
            ValueError, r"method 'forward' mutates input 'cache' .*" + _REGISTER_BUFFER
        ):
            _lower(ep)

    def test_input_that_is_only_read_is_fine(self):
        with torch.no_grad():
            ep = torch.export.export(UserCacheReadOnly(), _user_cache_args())
        executorch_trt.export(ep)


class Accumulator(torch.nn.Module):
    """``self.<name>.add_(input)``: a buffer updated with the method's input, the buffer named
    ``x`` (like the input, ``clash=True``) or ``total``."""

    def __init__(self, clash=True):
        super().__init__()
        self.name = "x" if clash else "total"
        self.register_buffer(self.name, torch.zeros(4))

    def forward(self, x):
        buf = getattr(self, self.name)
        buf.add_(x)
        return buf * 2


_NAMED_LIKE_INPUT = (
    r"updates buffer 'x' \(written by aten::add_?\.Tensor\), which has the name of one of the "
    r"method's inputs\. ExecuTorch 1\.5\.1 .*insert_write_back_for_buffers_pass.* takes the "
    r"input, so the buffer would never change.*Rename the forward argument "
    r"\(e\.g\. forward\(self, x_in\)\) or the buffer"
)


class BufferNamedLikeInputTest(absltest.TestCase):
    """ExecuTorch 1.5.1 writes such a buffer's update into the input (the buffer never
    changes): every lowering path refuses it; renamed, the state accumulates."""

    def _ep(self, clash):
        with torch.no_grad():
            return torch.export.export(Accumulator(clash), (torch.ones(4),))

    def test_export_rejects_naming_method_buffer_and_fix(self):
        with self.assertRaisesRegex(ValueError, r"method 'step' " + _NAMED_LIKE_INPUT):
            executorch_trt.export({"step": self._ep(clash=True)})

    def test_composable_path_rejects(self):
        with self.assertRaisesRegex(ValueError, r"method 'forward' " + _NAMED_LIKE_INPUT):
            _lower(self._ep(clash=True))

    def test_partitioning_an_edge_program_rejects(self):
        # to_edge, then to_backend: only TensorRTPartitioner.partition sees the program.
        with torch.no_grad():
            edge = to_edge(self._ep(clash=True))
        with self.assertRaisesRegex(ValueError, r"the method " + _NAMED_LIKE_INPUT):
            edge.to_backend(executorch_trt.TensorRTPartitioner())

    def test_renamed_buffer_accumulates(self):
        delegate_library.require()
        et = executorch_trt.export(self._ep(clash=False))
        method = runtime.load(et.buffer).load_method("forward")
        for step in range(1, 4):
            x = torch.arange(4.0)
            torch.testing.assert_close(method.execute([x])[0], x * 2 * step)


class Scaled(torch.nn.Module):
    """``self.inner.scale`` (a parameter, or a buffer with ``as_buffer=True``) updated in place
    with the input, then read."""

    def __init__(self, as_buffer=False):
        super().__init__()
        self.inner = torch.nn.Module()
        value = torch.full((4,), 0.5)
        if as_buffer:
            self.inner.register_buffer("scale", value)
        else:
            self.inner.scale = torch.nn.Parameter(value, requires_grad=False)

    def forward(self, x):
        self.inner.scale.add_(x)
        return self.inner.scale * x


_PARAMETER_UPDATED = (
    r"updates parameter 'inner\.scale' \(written by aten::add_?\.Tensor\) in place\. A "
    r"parameter is a constant of the program: its update would not persist to the next call\. "
    r".*delete the nn\.Parameter and register_buffer\('scale', <its value>\) on the module "
    r"that owns 'inner\.scale'"
)


class MutatedParameterTest(absltest.TestCase):
    """A parameter updated in place is refused on every lowering path (plain ExecuTorch returns
    its new value as an extra output and the next call reads the exported value again); as a
    buffer, the state accumulates as in eager."""

    def _ep(self, as_buffer=False):
        with torch.no_grad():
            return torch.export.export(Scaled(as_buffer), (torch.ones(4),))

    def test_export_rejects_naming_method_parameter_and_fix(self):
        with self.assertRaisesRegex(ValueError, r"method 'step' " + _PARAMETER_UPDATED):
            executorch_trt.export({"step": self._ep()})

    def test_composable_path_rejects(self):
        with self.assertRaisesRegex(ValueError, r"method 'forward' " + _PARAMETER_UPDATED):
            _lower(self._ep())

    def test_partitioning_an_edge_program_rejects(self):
        with torch.no_grad():
            edge = to_edge(self._ep())
        with self.assertRaisesRegex(ValueError, r"the method " + _PARAMETER_UPDATED):
            edge.to_backend(executorch_trt.TensorRTPartitioner())

    def test_as_a_buffer_the_state_accumulates(self):
        delegate_library.require()
        program = runtime.load(executorch_trt.export(self._ep(as_buffer=True)).buffer)
        method = program.load_method("forward")
        eager = Scaled(as_buffer=True)
        for step in range(3):
            x = torch.arange(4.0) + step
            with torch.no_grad():
                expected = eager(x)
            torch.testing.assert_close(method.execute([x])[0], expected)
            torch.testing.assert_close(program.buffer("inner.scale"), eager.inner.scale)


class CondUpdate(torch.nn.Module):
    """``acc`` updated by ``torch.cond``: in place inside the branches (``add_`` / ``mul_``), or,
    with ``after=True``, the new value returned by both branches and written after the cond
    (what the refusal says to do)."""

    def __init__(self, after=False):
        super().__init__()
        self.after = after
        self.register_buffer("acc", torch.ones(3))

    def forward(self, x, flag):
        if self.after:
            new = torch.cond(flag.sum() > 0, lambda x: self.acc + x, lambda x: self.acc * 2, (x,))
            self.acc.copy_(new)
            return self.acc * 1

        def grow(x):
            self.acc.add_(x)
            return self.acc * 1

        def double(x):
            self.acc.mul_(2.0)
            return self.acc * 1

        return torch.cond(flag.sum() > 0, grow, double, (x,))


_COND_BRANCH_WRITE = (
    r"updates buffer 'acc' \(aten::add_\.Tensor in true_graph_0\) inside a torch\.cond "
    r"branch\. .*to_edge refuses it .*Return the new value from both branches and write it "
    r"after the cond \(new = torch\.cond\(pred, t, f, ops\); self\.acc\.copy_\(new\)\)"
)


class CondBranchWriteTest(absltest.TestCase):
    """A buffer updated in place inside a ``torch.cond`` branch is refused with the fix (plain
    ExecuTorch fails in ``to_edge`` with "aten.copy_.default is not functional"); the fix
    exports and runs as eager."""

    def _ep(self, after=False):
        with torch.no_grad():
            return torch.export.export(CondUpdate(after), (torch.ones(3), torch.tensor([1])))

    def test_export_rejects_naming_method_buffer_and_fix(self):
        with self.assertRaisesRegex(ValueError, r"method 'step' " + _COND_BRANCH_WRITE):
            executorch_trt.export({"step": self._ep()})

    def test_composable_path_rejects(self):
        with self.assertRaisesRegex(ValueError, r"method 'forward' " + _COND_BRANCH_WRITE):
            _lower(self._ep())

    def test_the_value_written_after_the_cond_runs_as_eager(self):
        delegate_library.require()
        program = runtime.load(executorch_trt.export(self._ep(after=True)).buffer)
        method = program.load_method("forward")
        eager = CondUpdate(after=True)
        for step, flag in enumerate((1, -1, 1, -1)):
            x, f = torch.arange(3.0) + step, torch.tensor([flag])
            with torch.no_grad():
                want = eager(x, f)
            torch.testing.assert_close(method.execute([x, f])[0], want, msg=f"step {step}")
            torch.testing.assert_close(program.buffer("acc"), eager.acc)


class BytesAsInt(torch.nn.Module):
    """A float32 buffer's bytes read as int32 (``Tensor.view(dtype)``, ``aten::view_copy.dtype``),
    which ExecuTorch 1.5.1 has no kernel for; ``as_float=True`` reads the value converted
    instead (``.to``), which it has."""

    def __init__(self, as_float=False):
        super().__init__()
        self.as_float = as_float
        self.register_buffer("bits", torch.zeros(4))

    def forward(self, x):
        self.bits.add_(x)
        if self.as_float:
            return self.bits.to(torch.int32) + 0
        return self.bits.view(torch.int32) + 0


class Sorted(torch.nn.Module):
    """A buffer's values sorted (``aten::sort``, left on the host) after the delegate's add."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        self.seen.add_(x)
        return torch.sort(self.seen * 2).values


_NO_KERNEL = (
    r"the delegated graph needs aten::view_copy\.dtype_out, called by \w+ \(File .*"
    r"export_checks_test\.py\", line \d+, in forward .*self\.bits\.view\(torch\.int32\).*\)\. "
    r"ExecuTorch 1\.5\.1's runtime has no kernel for it .*'Missing operator'"
)


class NoKernelTest(absltest.TestCase):
    """An operation that exports but that no ExecuTorch runtime has a kernel for is refused at
    export, naming the kernel and the model line, not at load as a corrupt program."""

    def _ep(self, as_float=False):
        with torch.no_grad():
            return torch.export.export(BytesAsInt(as_float), (torch.ones(4),))

    def test_export_refuses_naming_kernel_and_line(self):
        with self.assertRaisesRegex(ValueError, _NO_KERNEL):
            executorch_trt.export(self._ep())

    def test_composable_path_refuses(self):
        with self.assertRaisesRegex(ValueError, _NO_KERNEL):
            _lower(self._ep()).to_executorch()

    def test_an_operator_left_on_the_host_is_named_at_load(self):
        # torch.sort is not the delegate's; ExecuTorch 1.5.1 has no sort kernel either, and only
        # a runtime that registers one can load the program.
        delegate_library.require()
        with torch.no_grad():
            ep = torch.export.export(Sorted(), (torch.ones(4),))
        program = executorch_trt.export(ep)
        with self.assertRaisesRegex(
            RuntimeError,
            r"(?s)cannot load method 'forward' \(error 20: OperatorMissing\): it calls an operator "
            r"no kernel is registered for in this runtime .*aten::sort\.values",
        ):
            runtime.load(program.buffer).load_method("forward")

    def test_the_converted_read_runs(self):
        delegate_library.require()
        method = runtime.load(executorch_trt.export(self._ep(as_float=True)).buffer).load_method(
            "forward"
        )
        for step in range(1, 3):
            torch.testing.assert_close(
                method.execute([torch.ones(4)])[0], torch.full((4,), step, dtype=torch.int32)
            )


class AllForms(torch.nn.Module):
    """Buffers ``a``..``g`` written in different ways, ``ro`` only read; user inputs ``u`` and
    ``w`` written, ``x`` only read."""

    def __init__(self):
        super().__init__()
        for name in "abcdefg":
            self.register_buffer(name, torch.zeros(2, 4, 4))
        self.register_buffer("ro", torch.ones(4))

    def forward(self, x, pos, u, w):
        self.a.index_copy_(1, pos, x)
        self.b[:, pos] = x
        self.c.narrow(1, 0, 1).copy_(x)
        self.d.add_(1)
        self.e.split(2, dim=1)[0].mul_(3)
        self.f[0].transpose(0, 1).zero_()
        torch.add(x.expand(2, 4, 4), 1, out=self.g)
        u.add_(1)
        w[:, 0] = 2
        return self.a + self.ro


class MutationScanTest(parameterized.TestCase):
    @parameterized.parameters(True, False)
    def test_scan_matches_run_decompositions(self, strict):
        args = (torch.ones(2, 1, 4), torch.tensor([1]), torch.zeros(3), torch.zeros(2, 2))
        with torch.no_grad():
            ep = torch.export.export(AllForms(), args, strict=strict)
        self.assertEqual(
            dict(ep.graph_signature.buffers_to_mutate),
            {},
            "torch.export left the signature empty (the reason for the scan)",
        )
        scan = mutated_inputs(ep)
        functional = ep.run_decompositions({}).graph_signature
        self.assertEqual(sorted(scan.buffers), sorted(functional.buffers_to_mutate.values()))
        self.assertEqual(sorted(scan.buffers), list("abcdefg"))
        self.assertEqual(
            sorted(scan.user_inputs), sorted(functional.user_inputs_to_mutate.values())
        )
        self.assertEqual(sorted(scan.user_inputs), ["u", "w"])
        self.assertEqual(scan.buffers["a"], "aten::index_copy_")
        self.assertEqual(scan.buffers["b"], "aten::index_put_")


if __name__ == "__main__":
    absltest.main()
