"""Dynamic shapes (issue 15): one ``prefill`` exported with ``Dim("T", min=1, max=16)`` takes
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
import lowering_utils as lu
import executorch_trt
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
        tokens = self.tokens[:, start:start + length]
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
            torch.testing.assert_close(mine, tensor, atol=1e-5, rtol=1e-5,
                                       msg=f"{context}: {name}")

    def test_blob_records_the_range_and_static_methods_stay_version_1(self):
        (prefill,) = _blobs(self.et, "prefill")
        self.assertEqual(prefill.header.format_version, 2)
        (symbol,) = prefill.metadata.symbols
        self.assertEqual((symbol.min, symbol.max, symbol.opt), (1, MAX_SEQ, 3))
        shapes = {b.name: b.shape for b in prefill.metadata.inputs}
        self.assertEqual(shapes["tokens"], (1, symbol.name))
        self.assertEqual(shapes["pos"], (symbol.name,))
        # The caches are static and still updated in place.
        self.assertTrue(all(b.is_static for b in prefill.metadata.inputs
                            if b.name not in ("tokens", "pos")))
        self.assertLen(prefill.metadata.aliased_io, 4)
        for method in ("decode", "read_state"):
            for blob in _blobs(self.et, method):
                self.assertEqual(blob.header.format_version, 1, method)
                self.assertEqual(blob.metadata.symbols, (), method)
        # executorch_trt.inspect (and //tools:inspect_pte) says so.
        report = executorch_trt.inspect(self.et.buffer)
        self.assertEqual(report.method("prefill").delegates[0].dynamic,
                         (f"{symbol.name} in [1, {MAX_SEQ}]",))
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
        cases = {
            "empty prompt (below min)": (torch.zeros(1, 0, dtype=torch.long),
                                         torch.zeros(0, dtype=torch.long)),
            "17 tokens (above max)": (torch.zeros(1, MAX_SEQ + 1, dtype=torch.long),
                                      torch.arange(MAX_SEQ + 1)),
            "3 tokens, 2 positions": (torch.zeros(1, 3, dtype=torch.long), torch.arange(2)),
        }
        for context, inputs in cases.items():
            with self.assertRaises((RuntimeError, ValueError), msg=context):
                prefill.execute(list(inputs))
            for name, tensor in self.state.items():
                torch.testing.assert_close(tensor, before[name], msg=f"{context}: {name}")
        # The program still works afterwards.
        self._step("prefill", 2, 4, "prefill after the rejections")


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
        return torch.export.export(SharedSize(), (torch.randn(6, 8),),
                                   dynamic_shapes={"x": {0: torch.export.Dim("n", min=1, max=16)}})

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
            to_edge_transform_and_lower(self._export(),
                                        partitioner=[executorch_trt.TensorRTPartitioner()])


if __name__ == "__main__":
    absltest.main()
