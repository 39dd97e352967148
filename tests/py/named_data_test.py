"""Weights in ExecuTorch's named data, once per program, optionally in a ``.ptd``.

The portable engine moves its nested XNNPACK weights into the outer program's named data
(``engines/portable/builder.py``), and ``external_weights=True`` puts them into
``model.ptd`` instead (``ExecutorchProgramManager.write_tensor_data_to_file``). On the small
decoder of ``decoder_models`` (prefill, decode and read_state sharing state), through the
runtime: the ``.pte`` shrinks by the weights and the ``.ptd`` holds them once; with the data
file the outputs equal the self-contained program's bit for bit and eager's within float32
tolerance; without it, or with another program's, or with a file that is not a ``.ptd``,
``runtime.load`` raises naming what to do (before the fix for the missing file it crashed in
XNNPACK).
"""

import os
import tempfile
import warnings

import torch
from absl.testing import absltest

import decoder_models as dm
import delegate_library
import executorch_trt
from executorch_trt.format.wire import EXTERNAL_WEIGHTS_TAG


def _export(decoder, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return executorch_trt.export(dm.export_methods(decoder), **options)


def _write(program, directory):
    """Writes ``program.pte`` and its data files into ``directory``; returns the .pte path."""
    pte = os.path.join(directory, "program.pte")
    with open(pte, "wb") as f:
        f.write(program.buffer)
    program.write_tensor_data_to_file(directory)
    return pte


def _weight_bytes(decoder):
    """Bytes of every parameter: the linears (XNNPACK's) and the embedding and norms (the
    nested program's external constants)."""
    return sum(p.numel() * p.element_size() for p in decoder.parameters())


@delegate_library.needs_library
class ExternalWeightsTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.decoder = dm.TinyDecoder()
        cls.inside = _export(cls.decoder)
        cls.outside = _export(cls.decoder, external_weights=True)
        cls.dir = tempfile.mkdtemp()
        cls.pte = _write(cls.outside, cls.dir)
        cls.ptd = os.path.join(cls.dir, f"{EXTERNAL_WEIGHTS_TAG}.ptd")

    def test_weights_leave_the_pte_once(self):
        weights = _weight_bytes(self.decoder)
        self.assertEqual(sorted(os.listdir(self.dir)), ["model.ptd", "program.pte"])
        # The .pte loses the weights (stored once, though three methods use them) ...
        self.assertLessEqual(len(self.outside.buffer), len(self.inside.buffer) - weights)
        # ... and the .ptd holds them once, plus its header and alignment.
        ptd_size = os.path.getsize(self.ptd)
        self.assertGreaterEqual(ptd_size, weights)
        self.assertLessEqual(ptd_size, weights + 4096)

    def test_every_weight_is_stored_once(self):
        # Three methods use each weight; XNNPACK's (the linears) and the nested programs' own
        # constants (embedding, norms) alike are stored once: in the .pte, or only in the .ptd.
        with open(self.ptd, "rb") as f:
            ptd = f.read()
        for name, param in self.decoder.named_parameters():
            data = param.detach().numpy().tobytes()
            self.assertEqual(self.inside.buffer.count(data), 1, name)
            self.assertEqual(self.outside.buffer.count(data), 0, name)
            self.assertEqual(ptd.count(data), 1, name)

    def test_outputs_equal_the_self_contained_program(self):
        from executorch_trt import runtime

        tokens, pos = torch.tensor([[5, 9, 1, 3]]), torch.arange(4)
        outputs = []
        for program in (runtime.load(self.inside.buffer), runtime.load(self.pte, data=self.ptd)):
            prefill, decode = program.load_method("prefill"), program.load_method("decode")
            got = [prefill.execute([tokens, pos])[0]]
            got.append(decode.execute([torch.tensor([[7]]), torch.tensor([4])])[0])
            outputs.append(got)
        for a, b in zip(*outputs):
            torch.testing.assert_close(a, b, atol=0, rtol=0)
        decoder = dm.TinyDecoder()  # fresh state, same weights (same seed)
        with torch.no_grad():
            want = dm.Step(decoder)(tokens, pos)
        torch.testing.assert_close(outputs[1][0], want, atol=1e-5, rtol=1e-5)

    def test_missing_wrong_or_other_data_file_is_an_error(self):
        from executorch_trt import runtime

        with self.assertRaisesRegex(RuntimeError, r"pass the \.ptd written with it") as e:
            runtime.load(self.pte)
        # The key the delegate logged is in the exception, not only on stderr.
        self.assertRegex(
            str(e.exception),
            r"ExecuTorch logged:\n(  .*\n)*  executorch_trt: "
            r"portable engine: constant '[^']+' is not in the "
            r"program's data",
        )
        with self.assertRaisesRegex(RuntimeError, "not an ExecuTorch data file"):
            runtime.load(self.pte, data=self.pte)
        with open(self.ptd, "rb") as f:
            head = f.read(64)
        cut = os.path.join(tempfile.mkdtemp(), "truncated.ptd")
        with open(cut, "wb") as f:
            f.write(head)
        with self.assertRaisesRegex(
            RuntimeError, r"truncated\.ptd: a damaged or truncated ExecuTorch data file"
        ):
            runtime.load(self.pte, data=cut)
        with self.assertRaisesRegex(FileNotFoundError, "no such .ptd file"):
            runtime.load(self.pte, data=os.path.join(self.dir, "absent.ptd"))
        with self.assertRaisesRegex(TypeError, "path of a .ptd file"):
            runtime.load(self.pte, data=b"bytes")
        other_dir = tempfile.mkdtemp()
        _write(_export(dm.TinyDecoder(seed=5), external_weights=True), other_dir)
        with self.assertRaisesRegex(RuntimeError, "written with this program"):
            runtime.load(self.pte, data=os.path.join(other_dir, f"{EXTERNAL_WEIGHTS_TAG}.ptd"))


if __name__ == "__main__":
    absltest.main()
