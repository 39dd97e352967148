"""End to end on the portable engine: export -> load -> execute with the real delegate library.

When ``libexecutorch_trt.so`` cannot be found (``executorch_trt.runtime.library_path``:
``$EXECUTORCH_TRT_LIBRARY`` or Bazel runfiles) the tests fail under Bazel and skip, with the
reason, outside it (``delegate_library``).
Reference numerics: eager PyTorch on the same weights (docs/testing.md, "How we know").
"""

import copy
import gc

import torch
from absl.testing import absltest, parameterized
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

import decoder_models as dm
import delegate_library
import executorch_trt
import lowering_utils as lu
from executorch_trt import runtime

PROMPT_LEN = 4
DECODE_STEPS = 5


def _export_program(decoder, finalise="export", **options):
    methods = dm.export_methods(copy.deepcopy(decoder), PROMPT_LEN)
    if finalise == "export":
        return executorch_trt.export(methods, **options).buffer
    with torch.no_grad():
        edge = to_edge_transform_and_lower(
            methods, partitioner=[executorch_trt.TensorRTPartitioner()]
        )
        # Stock config plus only what multi-method state needs (shared, initialised buffers),
        # but no in-place planning: the write-back path must be correct on its own.
        return edge.to_executorch(executorch_trt.backend_config(inplace=False)).buffer


@delegate_library.needs_library
class DecoderEndToEndTest(parameterized.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.decoder = dm.TinyDecoder()
        cls.programs = {
            "inplace": _export_program(cls.decoder),
            "copy_back": _export_program(cls.decoder, kv_cache="copy_back"),
            # The portable engine without its nested XNNPACK delegates.
            "no_xnnpack": _export_program(cls.decoder, portable_xnnpack=False),
            "write_back_planning": _export_program(cls.decoder, finalise="composable"),
        }
        cls.written_back = {
            mode: executorch_trt.inspect(pte).method("decode").state_bytes_copied_per_call
            for mode, pte in cls.programs.items()
        }
        torch.manual_seed(1)
        cls.prompt = torch.randint(0, 64, (1, PROMPT_LEN))

    def _read_state(self, program):
        return program.load_method("read_state").execute([torch.ones(1)])

    def _assert_state_equals(self, program, eager, context):
        got = self._read_state(program)
        want = list(eager.state_tensors().items())
        self.assertLen(got, len(want))
        for g, (name, w) in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5, msg=f"{context}: {name}")

    def _assert_logits_close(self, got, want, context):
        scale = max(want.abs().max().item(), 1.0)
        diff = (got - want).abs().max().item()
        self.assertLessEqual(diff, 1e-4 * scale, f"{context}: max abs diff {diff}")

    @parameterized.named_parameters(
        ("inplace", "inplace"),
        ("copy_back", "copy_back"),
        ("no_xnnpack", "no_xnnpack"),
        ("write_back_planning", "write_back_planning"),
    )
    def test_greedy_decode_matches_eager(self, mode):
        program = runtime.load(self.programs[mode])
        eager = copy.deepcopy(self.decoder)
        prefill, decode = program.load_method("prefill"), program.load_method("decode")
        with torch.no_grad():
            want = eager(self.prompt, torch.arange(PROMPT_LEN))
        (got,) = prefill.execute([self.prompt, torch.arange(PROMPT_LEN)])
        self._assert_logits_close(got, want, f"{mode} prefill")
        self._assert_state_equals(program, eager, f"{mode} after prefill")
        token = int(want[0, -1].argmax())
        kv_nbytes = sum(
            t.numel() * t.element_size()
            for n, t in eager.state_tensors().items()
            if n.endswith(("k_cache", "v_cache"))
        )
        for step in range(DECODE_STEPS):
            pos = torch.tensor([PROMPT_LEN + step])
            tokens = torch.tensor([[token]])
            with torch.no_grad():
                want = eager(tokens, pos)
            copied_before = runtime.bytes_copied()
            (got,) = decode.execute([tokens, pos])
            # The delegate's own copies per step: none in place (the output is the buffer) or
            # in copy_back (nothing aliased); with stock planning it reflects each updated
            # cache into ExecuTorch's separate output tensor.
            copied = runtime.bytes_copied() - copied_before
            self.assertEqual(
                copied,
                kv_nbytes if mode == "write_back_planning" else 0,
                f"{mode} step {step}: delegate bytes copied",
            )
            # State bytes copied per call, read off the plan by inspect: ExecuTorch's own
            # write-backs (the step counter and the recurrent state, 8 + 128 B, ordinary ops,
            # always; the KV caches unless in place) plus the delegate's reflect copies, which
            # must be exactly what the delegate's counter measured.
            self.assertEqual(
                self.written_back[mode],
                136 + (0 if mode in ("inplace", "no_xnnpack") else kv_nbytes) + copied,
                mode,
            )
            self._assert_logits_close(got, want, f"{mode} decode step {step}")
            self.assertEqual(int(got[0, -1].argmax()), int(want[0, -1].argmax()), f"step {step}")
            self._assert_state_equals(program, eager, f"{mode} after decode step {step}")
            token = int(want[0, -1].argmax())

    def test_fresh_load_starts_from_initial_values(self):
        program = runtime.load(self.programs["inplace"])
        self._assert_state_equals(program, copy.deepcopy(self.decoder), "fresh load")
        state = self._read_state(program)
        self.assertEqual(state[4].tolist(), [7], "steps starts at its exported value")

    def test_two_loads_are_isolated(self):
        a = runtime.load(self.programs["inplace"])
        b = runtime.load(self.programs["inplace"])
        a.load_method("prefill").execute([self.prompt, torch.arange(PROMPT_LEN)])
        self._assert_state_equals(b, copy.deepcopy(self.decoder), "untouched second load")
        self.assertNotEqual(self._read_state(a)[0].abs().sum().item(), 0.0)

    def test_repeated_decode_persists(self):
        """Persistence across calls on one loaded method, without prefill: each decode call
        adds one cache row and increments the counter."""
        program = runtime.load(self.programs["inplace"])
        decode = program.load_method("decode")
        eager = copy.deepcopy(self.decoder)
        for step in range(3):
            tokens, pos = torch.tensor([[step + 1]]), torch.tensor([step])
            with torch.no_grad():
                eager(tokens, pos)
            decode.execute([tokens, pos])
        state = self._read_state(program)
        self.assertEqual(state[4].tolist(), [10])
        k0 = state[0]
        self.assertTrue(torch.all(k0[:, :, :3].abs().sum(-1) > 0))
        self.assertTrue(torch.all(k0[:, :, 3:] == 0))
        self._assert_state_equals(program, eager, "after three decode calls")


@delegate_library.needs_library
class SeamModelEndToEndTest(parameterized.TestCase):
    """The reordered-argument model: outputs land in the right place in both modes."""

    @parameterized.parameters("inplace", "copy_back")
    def test_matches_eager(self, mode):
        program = runtime.load(
            executorch_trt.export(dm.export_reordered_kv(), kv_cache=mode).buffer
        )
        method = program.load_method("forward")
        eager = dm.ReorderedKV()
        torch.manual_seed(3)
        for step in range(6):
            pos, x = torch.tensor([step]), torch.randn(1, 1, 4)
            with torch.no_grad():
                want = eager(pos, x)
            (got,) = method.execute([pos, x])
            torch.testing.assert_close(got, want, msg=f"{mode} step {step}")

    def test_cache_read_outside_sees_old_value(self):
        program = runtime.load(executorch_trt.export(dm.export_cache_read_outside()).buffer)
        method = program.load_method("forward")
        eager = dm.CacheReadOutside()
        for step in range(3):
            idx, v = torch.tensor([step]), torch.full((1, 2), -1.0 - step)
            with torch.no_grad():
                want = eager(idx, v)
            got = method.execute([idx, v])
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, msg=f"step {step}")

    def test_stock_finalisation_persists(self):
        """Finalised with ExecuTorch's default config (no in-place planning, buffers not
        initialised): ExecuTorch's write-back alone keeps the cache. The first six steps write
        every row, so only the steps after them are compared (the start is uninitialised)."""
        with torch.no_grad():
            edge = to_edge_transform_and_lower(
                dm.export_reordered_kv(), partitioner=[executorch_trt.TensorRTPartitioner()]
            )
            program = runtime.load(edge.to_executorch().buffer)
        method = program.load_method("forward")
        eager = dm.ReorderedKV()
        torch.manual_seed(4)
        for step in range(14):
            pos, x = torch.tensor([step % 6]), torch.randn(1, 1, 4)
            with torch.no_grad():
                want = eager(pos, x)
            (got,) = method.execute([pos, x])
            if step >= 5:
                torch.testing.assert_close(got, want, msg=f"step {step}")


class StateOutsidePartition(torch.nn.Module):
    """``forward(x[1, 8]) -> y[1, 8]``. ``counter`` (int64) is advanced with ``bitwise_xor``
    and ``state`` (float) with ``atan``, neither of which the partitioner takes, so both
    mutations happen *outside* the delegate; the linear layers run inside it and read both."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
        self.register_buffer("counter", torch.tensor([3], dtype=torch.long))
        self.register_buffer("state", torch.full((1, 8), 0.5))

    def forward(self, x):
        self.counter.copy_(torch.bitwise_xor(self.counter, torch.tensor([5])) + 1)
        self.state.copy_(torch.atan(self.state + self.a(x)))
        return self.b(self.state) * self.counter.to(torch.float32)


@delegate_library.needs_library
class StateOutsidePartitionTest(parameterized.TestCase):
    @parameterized.parameters("inplace", "copy_back")
    def test_buffers_mutated_outside_the_delegate_persist(self, kv_cache):
        model = StateOutsidePartition()
        with torch.no_grad():
            ep = torch.export.export(copy.deepcopy(model), (torch.randn(1, 8),))
            manager = executorch_trt.export(ep, kv_cache=kv_cache)
        ops = {
            op.name for plan in manager.executorch_program.execution_plan for op in plan.operators
        }
        self.assertIn("aten::bitwise_xor", ops, "counter update must stay outside the delegate")
        delegates = [
            d.id for plan in manager.executorch_program.execution_plan for d in plan.delegates
        ]
        self.assertIn("TensorRTBackend", delegates)
        method = runtime.load(manager.buffer).load_method("forward")
        torch.manual_seed(6)
        for step in range(5):
            x = torch.randn(1, 8)
            with torch.no_grad():
                want = model(x)
            (got,) = method.execute([x])
            torch.testing.assert_close(got, want, msg=f"{kv_cache} step {step}")


@delegate_library.needs_library
class UnplannedBufferTest(absltest.TestCase):
    """``alloc_mutable_buffers=False``: the cache has no memory until the application binds
    some. Unbound, ``execute`` fails cleanly naming the buffer (it once pointed at the
    program's read-only initial value and crashed in the first KV write)."""

    def test_unbound_cache_is_an_error_not_a_crash(self):
        et = executorch_trt.export(
            dm.export_reordered_kv(), alloc_mutable_buffers=False, emit_mutable_buffer_names=True
        )
        plan = lu.execution_plan(et)
        (cache,) = lu.tensor_values_of_shape(plan, [1, 6, 4])
        self.assertIsNone(plan.values[cache].val.allocation_info)
        self.assertEqual(plan.values[cache].val.data_buffer_idx, 0, "no data in the program")
        method = runtime.load(et.buffer).load_method("forward")
        # Checked before running: the runtime names the buffer and what to do.
        with self.assertRaisesRegex(
            RuntimeError,
            r"buffer 'k_cache' has no storage.*"
            r"alloc_mutable_buffers=False.*bind_buffer",
        ):
            method.execute(list(dm.ReorderedKV.example_inputs()))

    def test_initial_value_needs_planned_buffers(self):
        with self.assertRaisesRegex(
            ValueError, "init_mutable_buffers=True needs alloc_mutable_buffers=True"
        ):
            executorch_trt.backend_config(
                alloc_mutable_buffers=False,
                init_mutable_buffers=True,
                emit_mutable_buffer_names=True,
            )


class RowsIntoCache(torch.nn.Module):
    """``forward(x[1, 2, 3, 4], pos[3]) -> cache * 1 + x.sum()`` after
    ``cache.index_copy_(2, pos, x)``; ``cache`` is ``[1, 2, 8, 4]``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 2, 8, 4))

    def forward(self, x, pos):
        self.cache.index_copy_(2, pos, x)
        return self.cache * 1 + x.sum()


@delegate_library.needs_library
class NonContiguousInputTest(parameterized.TestCase):
    """``Method.execute`` passes tensor inputs in contiguous layout: the pybinding reads a
    ``channels_last`` tensor's memory as if it were contiguous (wrong numbers) and rejects
    other strided tensors."""

    @parameterized.named_parameters(
        ("channels_last", lambda t: t.contiguous(memory_format=torch.channels_last)),
        ("transposed", lambda t: t.transpose(1, 3).contiguous().transpose(1, 3)),
        ("strided_slice", lambda t: torch.cat([t, t], dim=3)[..., ::2]),
    )
    def test_matches_eager(self, layout):
        with torch.no_grad():
            ep = torch.export.export(
                RowsIntoCache(), (torch.randn(1, 2, 3, 4), torch.tensor([0, 1, 2]))
            )
        method = runtime.load(executorch_trt.export(ep).buffer).load_method("forward")
        eager = RowsIntoCache()
        for step in range(2):
            x = layout(torch.arange(24.0).view(1, 2, 3, 4) + 100 * step)
            self.assertFalse(x.is_contiguous())
            strides = x.stride()
            pos = torch.tensor([0, 1, 2]) + 3 * step
            with torch.no_grad():
                want = eager(x, pos)
            (got,) = method.execute([x, pos])
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"step {step}")
            self.assertEqual(x.stride(), strides, "the caller's tensor is left as it was")


@delegate_library.needs_library
class MethodLifetimeTest(absltest.TestCase):
    def test_method_keeps_its_program_alive(self):
        # README's pattern: runtime.load(pte).load_method(name) with no reference to the
        # program kept. The stock method does not own its program (it once ran on a freed one:
        # "Expected 0 inputs", then a segfault).
        with torch.no_grad():
            ep = torch.export.export(
                RowsIntoCache(), (torch.randn(1, 2, 3, 4), torch.tensor([0, 1, 2]))
            )
        pte = executorch_trt.export(ep).buffer
        # From a bytearray the runtime makes its own bytes, which only the program holds.
        method = runtime.load(bytearray(pte)).load_method("forward")
        gc.collect()
        garbage = [b"\xff" * len(pte) for _ in range(64)]  # would reuse a freed program's memory
        eager = RowsIntoCache()
        for step in range(2):
            x, pos = torch.randn(1, 2, 3, 4), torch.tensor([0, 1, 2]) + 3 * step
            with torch.no_grad():
                want = eager(x, pos)
            (got,) = method.execute([x, pos])
            torch.testing.assert_close(got, want, msg=f"step {step}")
        del garbage


class Accumulate(torch.nn.Module):
    """``acc += x``; returns ``acc * 2``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        self.acc.add_(x)
        return self.acc * 2


@delegate_library.needs_library
class CorruptProgramTest(parameterized.TestCase):
    """A .pte whose execution plan names an input or output value the method does not have
    (ExecuTorch's Method::init accepts it; set_input / get_output then abort the process), or
    whose delegate has an incomplete compile spec, is refused at load."""

    @parameterized.parameters("inputs", "outputs")
    def test_an_input_or_output_index_out_of_range_is_refused(self, field):
        with torch.no_grad():
            pte = executorch_trt.export(torch.export.export(Accumulate(), (torch.ones(4),)))
        parsed = deserialize_pte_binary(bytes(pte.buffer))
        plan = parsed.program.execution_plan[0]
        getattr(plan, field)[0] = len(plan.values) + 248
        corrupt = bytes(serialize_pte_binary(parsed))
        with self.assertRaisesRegex(
            RuntimeError,
            rf"cannot load method 'forward': its {field[:-1]} 0 refers to no value of the method "
            r"\(error 35: InvalidProgram\); the program is corrupt: re-export it",
        ):
            runtime.load(corrupt).load_method("forward")
        # The same bytes re-serialised without the change load and run.
        intact = bytes(serialize_pte_binary(deserialize_pte_binary(bytes(pte.buffer))))
        (out,) = runtime.load(intact).load_method("forward").execute([torch.ones(4)])
        torch.testing.assert_close(out, torch.full((4,), 2.0))

    @parameterized.parameters("key", "value")
    def test_a_compile_spec_without_its_key_or_value_is_refused(self, field):
        # ExecuTorch's BackendDelegate::Init dereferences both (the flatbuffer verifier accepts
        # an absent field): the process crashed in load_method.
        with torch.no_grad():
            pte = executorch_trt.export(torch.export.export(Accumulate(), (torch.ones(4),)))
        parsed = deserialize_pte_binary(bytes(pte.buffer))
        setattr(parsed.program.execution_plan[0].delegates[0].compile_specs[1], field, None)
        corrupt = bytes(serialize_pte_binary(parsed))
        with self.assertRaisesRegex(
            RuntimeError,
            r"cannot load method 'forward': its delegate 0 has a compile spec \(1\) without its "
            r"key or value; the program is corrupt: re-export it",
        ):
            runtime.load(corrupt)

    def test_a_bundled_program_is_named_as_one(self):
        from executorch.devtools import BundledProgram
        from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
        from executorch.devtools.bundled_program.serialize import (
            serialize_from_bundled_program_to_flatbuffer,
        )

        model, x = Accumulate(), torch.ones(4)
        with torch.no_grad():
            pte = executorch_trt.export(torch.export.export(model, (x,)))
            case = MethodTestCase(inputs=[x], expected_outputs=[Accumulate()(x)])
        bundled = serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(pte, [MethodTestSuite("forward", [case])])
        )
        with self.assertRaisesRegex(
            RuntimeError,
            r"a bundled program \(\.bpte, a program with test cases from ExecuTorch's "
            r"devtools\), not a program; load the \.pte it was made from",
        ):
            runtime.load(bytes(bundled))


class LibraryPathTest(absltest.TestCase):
    def test_env_var_must_name_a_file(self):
        import os

        old = os.environ.get(runtime.LIBRARY_ENV)
        os.environ[runtime.LIBRARY_ENV] = "/nonexistent/libexecutorch_trt.so"
        try:
            with self.assertRaisesRegex(runtime.LibraryNotFoundError, "does not name a file"):
                runtime.library_path()
        finally:
            if old is None:
                del os.environ[runtime.LIBRARY_ENV]
            else:
                os.environ[runtime.LIBRARY_ENV] = old


if __name__ == "__main__":
    absltest.main()
