"""executorch_trt.inspect on real emitted programs (no mocks): delegate calls and the engine of
each delegate, operators outside delegates, every mutable buffer's update mode and bytes copied
per call, and the program-level summary; the accepted inputs (manager, bytes, path) and the
errors for bad ones."""

import json
import os
import pathlib
import tempfile
import warnings

import torch
from absl.testing import absltest
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

import decoder_models as dm
import executorch_trt
from executorch_trt.inspection.pte_file import ProgramReadError

CACHE_BYTES = 1 * 6 * 4 * 4  # ReorderedKV.k_cache: [1, 6, 4] float32
PORTABLE_WITH_XNNPACK = (
    "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program "
    "with XNNPACK, on the CPU)"
)
TINY_CACHE_BYTES = 1 * 2 * 16 * 8 * 4  # TinyDecoder k/v caches: [1, 2, 16, 8] float32


def _quiet(fn, *args, **kwargs):
    """Runs an export; its NotInPlaceWarnings (expected here for copy-back state) are not what
    these tests check."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            return fn(*args, **kwargs)


class _NoState(torch.nn.Module):
    """``forward(x[2, 4]) -> flip(linear(x))``: no buffers; ``flip`` stays outside the
    delegate."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.flip(self.linear(x), [0])


class _CacheInput(torch.nn.Module):
    """``forward(cache[1, 6, 4], x[1, 1, 4], pos[1])``: mutates a method *input*."""

    def forward(self, cache, x, pos):
        cache.index_copy_(1, pos, x)
        return cache.sum(-1)


class _ViewedCache(torch.nn.Module):
    """Reads views of its cache (``view``) before and after an ``index_copy_``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 3, 4))

    def forward(self, x, pos):
        before = self.cache.view(6, 4).sum(0)
        self.cache.index_copy_(1, pos, x)
        return before + self.cache.view(24).sum()


class DelegateProgramsTest(absltest.TestCase):
    """Programs exported with executorch_trt.export."""

    @classmethod
    def setUpClass(cls):
        cls.inplace = _quiet(
            executorch_trt.export, dm.export_reordered_kv(), emit_mutable_buffer_names=False
        )
        cls.named = _quiet(
            executorch_trt.export, dm.export_reordered_kv(), emit_mutable_buffer_names=True
        )
        cls.copy_back = _quiet(
            executorch_trt.export,
            dm.export_reordered_kv(),
            kv_cache="copy_back",
            emit_mutable_buffer_names=True,
        )
        cls.tiny = _quiet(
            executorch_trt.export,
            dm.export_methods(dm.TinyDecoder()),
            emit_mutable_buffer_names=True,
        )
        ep = _quiet(torch.export.export, _NoState(), (torch.ones(2, 4),))
        cls.no_state = _quiet(executorch_trt.export, ep)
        cls.not_inplace = _quiet(
            executorch_trt.export,
            dm.export_reordered_kv(),
            inplace=False,
            emit_mutable_buffer_names=True,
        )
        cls.no_xnnpack = _quiet(
            executorch_trt.export, dm.export_reordered_kv(), portable_xnnpack=False
        )

    def test_inplace_cache_is_updated_by_the_delegate(self):
        forward = executorch_trt.inspect(self.inplace).method("forward")
        self.assertEqual(forward.delegate_calls, {"TensorRTBackend": 1})
        self.assertEqual(forward.operators, {})
        (cache,) = forward.state
        # No FQN recorded without emit_mutable_buffer_names: a stable description instead.
        self.assertIsNone(cache.fqn)
        self.assertEqual(cache.name, f"value {cache.value} [1, 6, 4] float32")
        self.assertEqual(
            (cache.dtype, cache.shape, cache.nbytes), ("float32", (1, 6, 4), CACHE_BYTES)
        )
        self.assertEqual(cache.update, "in_place_delegate")
        self.assertEqual(cache.bytes_copied_per_call, 0)
        # Identified by its slot in the shared arena (export defaults) and by being read before
        # it is written; its all-zero initial value is not serialised.
        self.assertNotIn("initial_value", cache.evidence)
        self.assertIn("shared_arena", cache.evidence)
        self.assertIn("read_before_write", cache.evidence)
        self.assertEqual(forward.state_bytes_copied_per_call, 0)

    def test_delegate_blob_is_read(self):
        (delegate,) = executorch_trt.inspect(self.inplace).method("forward").delegates
        # ReorderedKV's delegate: inputs (x, k_cache, pos), outputs (new cache, user output),
        # the new cache aliased to the cache input.
        self.assertEqual(
            (delegate.backend, delegate.calls, delegate.engine), ("TensorRTBackend", 1, "portable")
        )
        self.assertEqual((delegate.inputs, delegate.outputs, delegate.aliased_outputs), (3, 2, 1))
        self.assertIsNone(delegate.note)

    def test_engine_is_named_per_delegate_method_and_program(self):
        # Read off the blob (its metadata's engine) and the portable payload's nested program:
        # nothing in the report may suggest TensorRT ran what the portable engine runs.
        report = executorch_trt.inspect(self.inplace)
        forward = report.method("forward")
        (delegate,) = forward.delegates
        self.assertEqual(
            (delegate.engine, delegate.device, delegate.nested_backends),
            ("portable", "CPU", ("XnnpackBackend",)),
        )
        self.assertEqual(
            delegate.engine_description, "nested ExecuTorch program with XNNPACK, on the CPU"
        )
        self.assertEqual(delegate.engine_label, "portable, CPU")
        self.assertEqual(forward.engines, {"portable": 1})
        self.assertEqual(forward.engine_labels, ("portable, CPU",))
        # The C++ runners' wording (examples/plan_delegates.h).
        self.assertEqual(forward.delegate_summary, PORTABLE_WITH_XNNPACK)
        self.assertEqual(report.summary.engines, {"portable": 1})
        self.assertEqual(
            report.summary.engine_summary,
            "engine portable (nested ExecuTorch program with XNNPACK, on the CPU)",
        )
        self.assertEqual(executorch_trt.inspect(self.tiny).summary.engines, {"portable": 3})

    def test_engine_without_nested_xnnpack(self):
        forward = executorch_trt.inspect(self.no_xnnpack).method("forward")
        (delegate,) = forward.delegates
        self.assertEqual((delegate.engine, delegate.nested_backends), ("portable", ()))
        self.assertEqual(
            forward.delegate_summary,
            "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program "
            "on ExecuTorch's kernels, on the CPU)",
        )

    def test_engine_in_json_and_text(self):
        report = executorch_trt.inspect(self.inplace)
        data = json.loads(json.dumps(report.to_json()))
        (method,) = data["methods"]
        # Added fields; the format's existing fields are unchanged.
        self.assertEqual(method["engines"], {"portable": 1})
        self.assertEqual(method["delegate_summary"], PORTABLE_WITH_XNNPACK)
        (delegate,) = method["delegates"]
        self.assertEqual(
            (
                delegate["engine"],
                delegate["device"],
                delegate["nested_backends"],
                delegate["engine_description"],
            ),
            (
                "portable",
                "CPU",
                ["XnnpackBackend"],
                "nested ExecuTorch program with XNNPACK, on the CPU",
            ),
        )
        self.assertEqual(data["summary"]["engines"], {"portable": 1})
        self.assertEqual(data["summary"]["engine_summary"], report.summary.engine_summary)
        lines = str(report).splitlines()
        self.assertEqual(
            lines[0],
            "executorch_trt.inspect: <ExecutorchProgramManager> (1 method; "
            "engine portable (nested ExecuTorch program with XNNPACK, on "
            "the CPU))",
        )
        engines = "  engines: portable x1 (nested ExecuTorch program with XNNPACK, on the CPU)"
        self.assertEqual(lines.count(engines), 2)  # the method and the program summary
        self.assertIn(
            "    delegate 0: TensorRTBackend, 1 call, portable engine, 3 inputs, "
            "2 outputs, 1 aliased",
            lines,
        )

    def test_unreadable_blob_has_an_unknown_engine(self):
        data = bytearray(self.inplace.buffer)
        blob = data.index(b"ETRT", 8)
        data[blob + 200] ^= 0xFF  # inside the checksummed metadata or payload
        report = executorch_trt.inspect(bytes(data))
        forward = report.method("forward")
        (delegate,) = forward.delegates
        self.assertIsNone(delegate.engine)
        self.assertIn("checksum", delegate.note)
        self.assertEqual(forward.engines, {"unknown": 1})
        self.assertEqual(
            forward.delegate_summary,
            "1 TensorRTBackend delegate, engine unknown (its blob cannot be read)",
        )
        self.assertIn("engines: unknown x1 (its blob cannot be read)", str(report))

    def test_names_are_the_buffer_fqns(self):
        (cache,) = executorch_trt.inspect(self.named).method("forward").state
        self.assertEqual((cache.name, cache.fqn), ("k_cache", "k_cache"))
        self.assertEqual(cache.update, "in_place_delegate")
        self.assertIn("name", cache.evidence)

    def test_copy_back_writes_the_whole_cache_back(self):
        forward = executorch_trt.inspect(self.copy_back).method("forward")
        self.assertEqual(forward.operators, {"aten::copy_": 1})
        cache = forward.buffer("k_cache")
        self.assertEqual(cache.update, "written_back")
        self.assertEqual(cache.bytes_copied_per_call, CACHE_BYTES)
        self.assertEqual(forward.state_bytes_copied_per_call, CACHE_BYTES)
        self.assertFalse(executorch_trt.inspect(self.copy_back).summary.zero_copy)

    def test_aliased_output_with_write_back_counts_both_copies(self):
        # inplace=False: the blob still aliases the new cache to the cache input, but the
        # delegate output is a separate value: the delegate copies the updated cache into it
        # (its reflect copy), then ExecuTorch copies it back.
        cache = executorch_trt.inspect(self.not_inplace).method("forward").buffer("k_cache")
        self.assertEqual(cache.update, "written_back")
        self.assertEqual(cache.bytes_copied_per_call, 2 * CACHE_BYTES)
        self.assertEqual(cache.delegate_bytes_copied_per_call, CACHE_BYTES)
        self.assertLen(cache.updated_by, 3)
        self.assertStartsWith(cache.updated_by[0], "aten::copy_ from value ")
        self.assertIn("aliased_io", cache.updated_by[1])
        self.assertRegex(
            cache.updated_by[2],
            rf"TensorRTBackend delegate 0 reflect copy: .* "
            rf"{CACHE_BYTES} bytes$",
        )

    def test_in_place_delegate_makes_no_reflect_copy(self):
        for program in (self.inplace, self.named, self.copy_back):
            for s in executorch_trt.inspect(program).method("forward").state:
                self.assertEqual(s.delegate_bytes_copied_per_call, 0, s.name)

    def test_decoder_caches_in_place_and_scalar_state_written_back(self):
        report = executorch_trt.inspect(self.tiny)
        self.assertEqual([m.name for m in report.methods], ["decode", "prefill", "read_state"])
        for method in ("prefill", "decode"):
            m = report.method(method)
            self.assertEqual(m.delegate_calls, {"TensorRTBackend": 1}, method)
            modes = {s.name: (s.update, s.bytes_copied_per_call) for s in m.state}
            expected = {
                f"m.layers.{i}.{kv}_cache": ("in_place_delegate", 0)
                for i in range(2)
                for kv in "kv"
            }
            expected["m.steps"] = ("written_back", 8)  # [1] int64
            expected["m.state"] = ("written_back", 32 * 4)  # [1, 32] float32
            self.assertEqual(modes, expected, method)
            self.assertEqual(m.state_bytes_copied_per_call, 8 + 128, method)
            self.assertEqual(m.operators, {"aten::copy_": 2}, method)
        read_state = report.method("read_state")
        self.assertEqual({s.update for s in read_state.state}, {"read_only"})
        self.assertLen(read_state.state, 6)
        summary = report.summary
        # Shared by all three methods: each buffer counted once.
        self.assertEqual(summary.state_buffers, 6)
        self.assertEqual(summary.state_bytes, 4 * TINY_CACHE_BYTES + 8 + 128)
        self.assertEqual(
            summary.state_bytes_copied_per_call, {"decode": 136, "prefill": 136, "read_state": 0}
        )
        self.assertEqual(summary.delegate_calls, {"TensorRTBackend": 3})

    def test_program_without_state(self):
        report = executorch_trt.inspect(self.no_state)
        forward = report.method("forward")
        self.assertEqual(forward.state, ())
        self.assertEqual(forward.operators, {"aten::flip.out": 1})
        self.assertEqual(forward.delegate_calls, {"TensorRTBackend": 1})
        self.assertEqual((report.summary.state_buffers, report.summary.zero_copy), (0, True))
        self.assertIn("state: none", str(report))

    def test_bytes_paths_and_manager_give_the_same_report(self):
        from_manager = executorch_trt.inspect(self.tiny)
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            path = os.path.join(tmp, "tiny.pte")
            with open(path, "wb") as f:
                f.write(self.tiny.buffer)
            for source in (self.tiny.buffer, bytearray(self.tiny.buffer), path, pathlib.Path(path)):
                report = executorch_trt.inspect(source)
                self.assertEqual(report.methods, from_manager.methods, type(source).__name__)
                self.assertEqual(report.size, len(self.tiny.buffer))
            self.assertEqual(executorch_trt.inspect(path).source, path)

    def test_json_and_table(self):
        report = executorch_trt.inspect(self.copy_back)
        data = json.loads(json.dumps(report.to_json()))
        self.assertEqual(data["format"], "executorch_trt.inspect/1")
        (method,) = data["methods"]
        self.assertEqual(method["delegate_calls"], {"TensorRTBackend": 1})
        self.assertEqual(method["state"][0]["name"], "k_cache")
        self.assertEqual(method["state"][0]["update"], "written_back")
        self.assertEqual(method["state"][0]["shape"], [1, 6, 4])
        self.assertEqual(method["state_bytes_copied_per_call"], CACHE_BYTES)
        self.assertEqual(data["summary"]["state_bytes_copied_per_call"], {"forward": CACHE_BYTES})
        text = str(report)
        self.assertEqual(text, report.format_table())
        self.assertRegex(text, r"k_cache\s+float32\s+\[1, 6, 4\]\s+96\s+written_back\s+96")
        self.assertIn(f"state bytes copied per call: {CACHE_BYTES}", text)


class ComposableWithoutConfigTest(absltest.TestCase):
    """``to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner()]).to_executorch()``
    without ``backend_config()``: the blob aliases the new cache to the cache input, ExecuTorch
    passes a separate output value, so on every call the delegate copies the updated cache into
    it (its reflect copy, ``runtime.bytes_copied()``) and ExecuTorch copies it back."""

    @classmethod
    def setUpClass(cls):
        def lower():
            edge = to_edge_transform_and_lower(
                dm.export_reordered_kv(), partitioner=[executorch_trt.TensorRTPartitioner()]
            )
            return edge.to_executorch()

        cls.report = executorch_trt.inspect(_quiet(lower))

    def test_reflect_copy_and_write_back_are_both_counted(self):
        forward = self.report.method("forward")
        self.assertEqual(forward.operators, {"aten::copy_": 1})
        (cache,) = forward.state
        self.assertEqual(cache.update, "written_back")
        self.assertEqual(cache.bytes_copied_per_call, 2 * CACHE_BYTES)
        self.assertEqual(cache.delegate_bytes_copied_per_call, CACHE_BYTES)
        self.assertTrue(any("reflect copy" in w for w in cache.updated_by), cache.updated_by)
        self.assertEqual(forward.state_bytes_copied_per_call, 2 * CACHE_BYTES)
        self.assertEqual(
            self.report.summary.state_bytes_copied_per_call, {"forward": 2 * CACHE_BYTES}
        )
        self.assertFalse(self.report.summary.zero_copy)

    def test_json_and_table_show_the_reflect_copy(self):
        data = json.loads(json.dumps(self.report.to_json()))
        (state,) = data["methods"][0]["state"]
        self.assertEqual(
            (state["bytes_copied_per_call"], state["delegate_bytes_copied_per_call"]),
            (2 * CACHE_BYTES, CACHE_BYTES),
        )
        text = str(self.report)
        self.assertRegex(text, rf"written_back\s+{2 * CACHE_BYTES}\n")
        self.assertRegex(
            text,
            rf"note: value \d+ \[1, 6, 4\] float32: {CACHE_BYTES} of its bytes "
            r"copied per call are the delegate's reflect copy",
        )
        self.assertIn(f"state bytes copied per call: {2 * CACHE_BYTES}", text)


class PlainExecuTorchTest(absltest.TestCase):
    """Programs without our delegate or config: state found from the plan alone."""

    @classmethod
    def setUpClass(cls):
        ep = dm.export_reordered_kv()
        cls.default = _quiet(lambda: to_edge(ep).to_executorch())
        cls.reinplace = _quiet(
            lambda: to_edge(ep).to_executorch(ExecutorchBackendConfig(run_reinplace_pass=True))
        )
        cache_ep = _quiet(
            torch.export.export,
            _CacheInput(),
            (torch.zeros(1, 6, 4), torch.ones(1, 1, 4), torch.tensor([1])),
        )
        cls.cache_input = _quiet(lambda: to_edge(cache_ep).to_executorch())
        viewed_ep = _quiet(
            torch.export.export, _ViewedCache(), (torch.ones(2, 1, 4), torch.tensor([1]))
        )
        cls.viewed = _quiet(
            lambda: to_edge(viewed_ep).to_executorch(
                ExecutorchBackendConfig(run_reinplace_pass=True, emit_mutable_buffer_names=True)
            )
        )
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        cls.xnnpack = _quiet(
            lambda: to_edge_transform_and_lower(
                ep, partitioner=[XnnpackPartitioner()]
            ).to_executorch()
        )

    def test_no_delegate_and_another_backend_have_no_engine(self):
        default = executorch_trt.inspect(self.default)
        self.assertEqual(default.method("forward").engines, {})
        self.assertEqual(
            default.method("forward").delegate_summary, "no delegate (ExecuTorch's CPU kernels)"
        )
        self.assertEqual(
            (default.summary.engines, default.summary.engine_summary),
            ({}, "no delegate (ExecuTorch's CPU kernels)"),
        )
        self.assertIn("engines: none (no TensorRTBackend delegate)", str(default))
        xnnpack = executorch_trt.inspect(self.xnnpack)
        forward = xnnpack.method("forward")
        self.assertTrue(forward.delegates)
        for d in forward.delegates:
            self.assertEqual(
                (d.backend, d.engine, d.device, d.engine_label),
                ("XnnpackBackend", None, None, None),
            )
        n = len(forward.delegates)
        self.assertEqual(
            forward.delegate_summary, f"{n} XnnpackBackend delegate{'s' if n != 1 else ''}"
        )
        self.assertEqual((forward.engines, forward.engine_labels), ({}, ()))
        self.assertEqual(
            xnnpack.summary.engine_summary, "no TensorRTBackend delegate (XnnpackBackend delegates)"
        )
        self.assertTrue(
            str(xnnpack)
            .splitlines()[0]
            .endswith("; no TensorRTBackend delegate (XnnpackBackend delegates))")
        )

    def test_default_config_writes_the_cache_back(self):
        forward = executorch_trt.inspect(self.default).method("forward")
        self.assertEqual(forward.delegate_calls, {})
        self.assertEqual(forward.operators["aten::index_put.out"], 1)
        self.assertEqual(forward.operators["aten::copy_"], 1)
        # No names, no initial values, no shared arena: found as the write-back destination;
        # views of inputs and intermediates are not state.
        (cache,) = forward.state
        self.assertEqual(cache.shape, (1, 6, 4))
        self.assertEqual(cache.evidence, ("write_back", "read_before_write"))
        self.assertEqual(cache.update, "written_back")
        self.assertEqual(cache.bytes_copied_per_call, CACHE_BYTES)
        # index_put.out materialises a full updated copy before the write-back.
        self.assertEqual(cache.functional_update_bytes_per_call, CACHE_BYTES)

    def test_reinplace_pass_updates_the_cache_in_a_kernel(self):
        forward = executorch_trt.inspect(self.reinplace).method("forward")
        self.assertNotIn("aten::copy_", forward.operators)
        (cache,) = forward.state
        self.assertEqual(cache.update, "in_place_kernel")
        self.assertEqual(cache.updated_by, ("aten::index_put_",))
        self.assertEqual(cache.bytes_copied_per_call, 0)
        self.assertTrue(executorch_trt.inspect(self.reinplace).summary.zero_copy)

    def test_views_of_a_buffer_are_the_buffer(self):
        # ExecuTorch emits cache.view(6, 4) as a second value on the cache's storage (and gives
        # it the cache's name): one buffer, with the view listed.
        forward = executorch_trt.inspect(self.viewed).method("forward")
        (cache,) = forward.state
        self.assertEqual(
            (cache.name, cache.shape, cache.update), ("cache", (2, 3, 4), "in_place_kernel")
        )
        self.assertLen(cache.views, 1)
        self.assertEqual(executorch_trt.inspect(self.viewed).summary.state_bytes, 96)

    def test_mutated_method_input_is_reported_apart_from_state(self):
        forward = executorch_trt.inspect(self.cache_input).method("forward")
        self.assertEqual(forward.state, ())
        (written,) = forward.written_inputs
        self.assertEqual(written.name, "input 0 [1, 6, 4] float32")
        self.assertEqual(
            (written.update, written.bytes_copied_per_call), ("written_back", CACHE_BYTES)
        )
        self.assertEqual(forward.input_bytes_copied_per_call, CACHE_BYTES)
        self.assertEqual(forward.state_bytes_copied_per_call, 0)
        self.assertFalse(executorch_trt.inspect(self.cache_input).summary.zero_copy)


class BadInputTest(absltest.TestCase):
    def setUp(self):
        self.tmp = self.create_tempdir().full_path

    def _write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_missing_file(self):
        path = os.path.join(self.tmp, "missing.pte")
        with self.assertRaisesRegex(ProgramReadError, f"{path}: no such file"):
            executorch_trt.inspect(path)

    def test_directory(self):
        with self.assertRaisesRegex(ProgramReadError, "is a directory"):
            executorch_trt.inspect(self.tmp)

    def test_not_a_program(self):
        path = self._write("notes.txt", b"these are not the bytes of a program\n")
        with self.assertRaisesRegex(ProgramReadError, r"notes\.txt: not an ExecuTorch program"):
            executorch_trt.inspect(path)

    def test_truncated_program(self):
        program = _quiet(executorch_trt.export, dm.export_reordered_kv()).buffer
        for size in (20, 1000, len(program) - 1):
            path = self._write(f"cut{size}.pte", program[:size])
            with self.assertRaisesRegex(ProgramReadError, "truncated"):
                executorch_trt.inspect(path)

    def test_wrong_type(self):
        with self.assertRaisesRegex(TypeError, "got int"):
            executorch_trt.inspect(42)


if __name__ == "__main__":
    absltest.main()
