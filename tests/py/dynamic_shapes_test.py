"""Dynamic shapes: one ``prefill`` exported with ``Dim("T", min=1, max=16)`` takes
every prompt length in the range on one loaded program, through the real delegate library.

Each case runs the same calls on an eager copy of the decoder and compares the logits and every
state tensor (KV caches, step counter, recurrent state) after each call. The caller owns the
state (``Program.bind_state``): its tensors must be the storage every call updates (same
``data_ptr`` before and after), and no call may copy state (``runtime.bytes_copied``).
"""

import copy

import torch
from absl.testing import absltest, parameterized

import decoder_models as dm
import delegate_library
import executorch_trt
import lowering_utils as lu
from executorch_trt import runtime

MAX_SEQ = 16


def _blobs(et, method):
    gm = et.exported_program(method).graph_module
    return [lu.blob_of(gm, call) for call in lu.delegate_calls(gm)]


@delegate_library.needs_library
class DynamicPrefillTest(parameterized.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.decoder = dm.TinyDecoder(max_seq=MAX_SEQ)
        cls.et = executorch_trt.export(dm.export_dynamic_prefill(copy.deepcopy(cls.decoder)))
        torch.manual_seed(3)
        cls.tokens = torch.randint(0, 64, (1, MAX_SEQ))

    def setUp(self):
        self.program = runtime.load(self.et.buffer)
        self.state = self.program.new_state()
        self.program.bind_state(self.state)
        self.pointers = {name: t.data_ptr() for name, t in self.state.items()}
        self.eager = copy.deepcopy(self.decoder)

    def _step(self, method, start, length, context):
        """Runs ``method`` on tokens ``start .. start+length-1`` at those positions, in the
        program and in eager, and compares logits and state."""
        tokens = self.tokens[:, start : start + length]
        pos = torch.arange(start, start + length)
        copied = runtime.bytes_copied()
        (got,) = self.program.load_method(method).execute([tokens, pos])
        self.assertEqual(runtime.bytes_copied() - copied, 0, f"{context}: state was copied")
        with torch.no_grad():
            want = dm.Step(self.eager)(tokens, pos)
        self.assertEqual(tuple(got.shape), (1, length, 64), context)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=context)
        for name, tensor in self.eager.state_tensors().items():
            mine = self.state[f"m.{name}"]
            self.assertEqual(mine.data_ptr(), self.pointers[f"m.{name}"], f"{context}: {name}")
            torch.testing.assert_close(mine, tensor, atol=1e-5, rtol=1e-5, msg=f"{context}: {name}")

    def test_blob_records_the_range_and_static_methods_stay_version_1(self):
        (prefill,) = _blobs(self.et, "prefill")
        self.assertEqual(prefill.header.format_version, 2)
        (symbol,) = prefill.metadata.symbols
        self.assertEqual((symbol.min, symbol.max, symbol.opt), (1, MAX_SEQ, 3))
        self.assertEqual(symbol.name, "T", "the torch.export.Dim's name, not the shape env's")
        shapes = {b.name: b.shape for b in prefill.metadata.inputs}
        self.assertEqual(shapes["tokens"], (1, symbol.name))
        self.assertEqual(shapes["pos"], (symbol.name,))
        # The caches are static and still updated in place.
        self.assertTrue(
            all(b.is_static for b in prefill.metadata.inputs if b.name not in ("tokens", "pos"))
        )
        self.assertLen(prefill.metadata.aliased_io, 4)
        for method in ("decode", "read_state"):
            for blob in _blobs(self.et, method):
                self.assertEqual(blob.header.format_version, 1, method)
                self.assertEqual(blob.metadata.symbols, (), method)
        # executorch_trt.inspect (and //tools:inspect_pte) says so.
        report = executorch_trt.inspect(self.et.buffer)
        self.assertEqual(
            report.method("prefill").delegates[0].dynamic, (f"{symbol.name} in [1, {MAX_SEQ}]",)
        )
        self.assertEqual(report.method("decode").delegates[0].dynamic, ())
        self.assertIn(f"dynamic {symbol.name} in [1, {MAX_SEQ}]", str(report))

    @parameterized.parameters(1, 2, MAX_SEQ - 1, MAX_SEQ)
    def test_prompt_length_then_decode(self, length):
        self._step("prefill", 0, length, f"prefill of {length}")
        if length < MAX_SEQ:
            self._step("decode", length, 1, f"decode after a prefill of {length}")

    def test_chunked_prefill_then_decode(self):
        self._step("prefill", 0, 3, "first chunk")
        self._step("prefill", 3, 5, "second chunk")
        self._step("prefill", 8, 1, "one-token chunk")
        self._step("decode", 9, 1, "decode")
        self._step("decode", 10, 1, "decode")

    def test_sizes_outside_the_range_or_untied_are_rejected_and_leave_state_alone(self):
        self._step("prefill", 0, 2, "prefill")
        before = {name: t.clone() for name, t in self.state.items()}
        prefill = self.program.load_method("prefill")
        # Each exception says why: the delegate's own check (logged by it, carried by the
        # exception) names the Dim as exported ('T'), or ExecuTorch's set_input refuses a size
        # above the upper bound it planned, which the message calls a bound.
        delegate = (
            r"method 'prefill': execute failed \(error 18: InvalidArgument\); "
            r"ExecuTorch logged:\n  "
        )
        cases = {
            "empty prompt (below min)": (
                (torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long)),
                RuntimeError,
                delegate + r"executorch_trt: delegate argument \d \(input '(pos|tokens)'\) "
                rf"dimension \d is 0, outside the range \[1, {MAX_SEQ}\] of its dynamic size 'T'",
            ),
            "17 tokens (above max)": (
                (torch.zeros(1, MAX_SEQ + 1, dtype=torch.long), torch.arange(MAX_SEQ + 1)),
                ValueError,
                (
                    rf"method 'prefill': input 0 is tensor Long \[1, {MAX_SEQ + 1}\], expected "
                    rf"tensor Long with shape at most \[1, {MAX_SEQ}\], a dynamic shape whose "
                    rf"dimension 1 is {MAX_SEQ + 1} > {MAX_SEQ} \(set_input error"
                ),
            ),
            "3 tokens, 2 positions": (
                (torch.zeros(1, 3, dtype=torch.long), torch.arange(2)),
                RuntimeError,
                delegate + r"executorch_trt: delegate argument \d \(input '(pos|tokens)'\) "
                r"dimension \d is [23] but an earlier input gave dynamic size 'T' the value [23]; "
                r"every dimension exported as 'T' must have one size per call",
            ),
            # Fits the planned capacity (so set_input takes it) but its static size is wrong;
            # the expected shape names T's range, not the capacity.
            "a batch of 2": (
                (torch.zeros(2, 3, dtype=torch.long), torch.arange(3)),
                RuntimeError,
                delegate + r"executorch_trt: delegate argument \d \(input 'tokens'\) is int64 "
                rf"\[2, 3\] \(48 bytes\), the engine expects int64 \[1, T=1\.\.{MAX_SEQ}\] "
                rf"\(at most {8 * MAX_SEQ} bytes\)",
            ),
        }
        for context, (inputs, error, message) in cases.items():
            with self.subTest(context):
                with self.assertRaisesRegex(error, message) as raised:
                    prefill.execute(list(inputs))
                self.assertNotRegex(str(raised.exception), r"'s\d+'", "a shape-env name")
                for name, tensor in self.state.items():
                    torch.testing.assert_close(tensor, before[name], msg=name)
        # The program still works afterwards.
        self._step("prefill", 2, 4, "prefill after the rejections")


class TwoSizes(torch.nn.Module):
    """Two inputs, each with a dynamic size of its own, in one delegate."""

    def forward(self, x, y):
        return x * 2, y + 1


class DimNamesTest(absltest.TestCase):
    """The blob names a dynamic size as its ``torch.export.Dim`` does, so that the runtime's
    messages say ``'T'``; the shape environment's name (``s58``) when it has no name of its own
    or when its name would repeat in the blob."""

    def _names(self, dim_x, dim_y):
        ep = torch.export.export(
            TwoSizes(),
            (torch.randn(3, 4), torch.randn(5, 4)),
            dynamic_shapes={"x": {0: dim_x}, "y": {0: dim_y}},
        )
        (blob,) = _blobs(executorch_trt.export(ep), "forward")
        names = {b.name: b.shape[0] for b in blob.metadata.inputs}
        self.assertEqual(
            sorted(s.name for s in blob.metadata.symbols),
            sorted({names["x"], names["y"]}),
            "the shapes name the symbols",
        )
        self.assertEqual(
            {s.name: s.max for s in blob.metadata.symbols},
            {names["x"]: 8, names["y"]: 8},
            "the ranges are still found",
        )
        return names["x"], names["y"]

    def test_each_dim_names_its_symbol(self):
        Dim = torch.export.Dim
        self.assertEqual(
            self._names(Dim("rows", min=1, max=8), Dim("n", min=1, max=8)), ("rows", "n")
        )

    def test_an_unnamed_size_keeps_its_name_and_a_repeated_name_falls_back(self):
        Dim = torch.export.Dim
        x, y = self._names(Dim.DYNAMIC(min=1, max=8), Dim("n", min=1, max=8))
        self.assertRegex(x, r"^s\d+$")
        self.assertEqual(y, "n")
        # y's Dim named like x's shape-environment symbol: recording it would give the blob two
        # symbols of one name, so y keeps its own symbol's name.
        x2, y2 = self._names(Dim.DYNAMIC(min=1, max=8), Dim(x, min=1, max=8))
        self.assertEqual(x2, x, "the same source gives the same shape-environment name")
        self.assertRegex(y2, r"^s\d+$")
        self.assertNotEqual(y2, x2)


class SharedSize(torch.nn.Module):
    """``n = x.shape[0]`` read by a delegated ``reshape`` and by ``topk``, which the delegate
    does not take: the size is needed on both sides of the delegate."""

    def forward(self, x):
        n = x.shape[0]
        y = (x * 2).reshape(n, 2, 4)
        values, _ = torch.topk(x.sum(-1), n)
        return y + 1, values


@delegate_library.needs_library
class SharedSizeTest(parameterized.TestCase):
    """passes/size_copies.py: the delegate computes its own copy of a size read outside too."""

    def _export(self):
        return torch.export.export(
            SharedSize(),
            (torch.randn(6, 8),),
            dynamic_shapes={"x": {0: torch.export.Dim("n", min=1, max=16)}},
        )

    def test_runs_at_every_size_and_matches_eager(self):
        et = executorch_trt.export(self._export())
        self.assertLen(lu.delegate_calls(et.exported_program().graph_module), 1)
        method = runtime.load(et.buffer).load_method("forward")
        for n in (1, 5, 16):
            x = torch.randn(n, 8)
            for got, want in zip(method.execute([x]), SharedSize()(x)):
                torch.testing.assert_close(got, want, msg=f"n = {n}")

    def test_without_the_copy_the_size_would_cross_the_boundary(self):
        from executorch.exir import to_edge_transform_and_lower

        with self.assertRaisesRegex(ValueError, r"delegate input 'sym_size\w*' is a symbolic int"):
            to_edge_transform_and_lower(
                self._export(), partitioner=[executorch_trt.TensorRTPartitioner()]
            )


if __name__ == "__main__":
    absltest.main()
