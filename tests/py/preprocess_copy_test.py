"""What ``preprocess`` is given: the partition's graph copied, its tensors shared.

ExecuTorch copies every partition of every method before preprocessing any of them, with
``BackendDetails.copy_exported_program_for_preprocess`` (a deep copy unless the backend says
otherwise). ``TensorRTBackend`` copies the graph and shares the tensors, since ``preprocess``
never writes them (``backend/preprocess.py``). On the small decoder of ``decoder_models``
(prefill, decode and read_state; weights and mutable buffers):

* every weight a ``preprocess`` call sees is the eager model's own tensor (its storage), not a
  copy;
* the ``.pte`` is byte for byte the one ExecuTorch's default deep copy gives;
* the eager model's parameters and buffers keep their values through the export.
"""

import copy
import unittest.mock
import warnings

import torch
from absl.testing import absltest

import decoder_models as dm
import executorch_trt
from executorch_trt.backend.preprocess import TensorRTBackend


def _export(decoder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return executorch_trt.export(dm.export_methods(decoder))


def _storages(module: torch.nn.Module) -> dict[str, int]:
    """``{fqn: data pointer of its storage}`` of every parameter and buffer of ``module``."""
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return {name: t.untyped_storage().data_ptr() for name, t in tensors.items()}


class PreprocessCopyTest(absltest.TestCase):
    def test_preprocess_sees_the_eager_models_tensors(self):
        decoder = dm.TinyDecoder()
        # The methods wrap the decoder as attribute ``m`` (decoder_models.Step, ReadState).
        eager = {f"m.{name}": pointer for name, pointer in _storages(decoder).items()}
        seen: list[dict[str, int]] = []
        preprocess = TensorRTBackend.preprocess

        def recording(edge_program, compile_specs):
            sig = edge_program.graph_signature
            names = [*sig.inputs_to_parameters.values(), *sig.inputs_to_buffers.values()]
            seen.append({n: edge_program.state_dict[n].untyped_storage().data_ptr() for n in names})
            return preprocess(edge_program, compile_specs)

        with unittest.mock.patch.object(TensorRTBackend, "preprocess", staticmethod(recording)):
            _export(decoder)
        self.assertLen(seen, 3)  # one delegate per method
        # prefill and decode read every weight (the mutable buffers stay above the delegate).
        weights = {f"m.{name}" for name, _ in decoder.named_parameters()}
        for method in seen[:2]:
            self.assertLessEqual(weights, method.keys())
        for method in seen:
            for name in method.keys() & eager.keys():
                self.assertEqual(method[name], eager[name], f"{name} is a copy")

    def test_the_program_equals_the_one_a_deep_copy_gives(self):
        decoder = dm.TinyDecoder()
        shared = _export(decoder).buffer
        deep = classmethod(lambda cls, edge_program, compile_specs: copy.deepcopy(edge_program))
        with unittest.mock.patch.object(
            TensorRTBackend, "copy_exported_program_for_preprocess", deep
        ):
            copied = _export(decoder).buffer
        self.assertEqual(len(shared), len(copied))
        self.assertTrue(shared == copied, "the .pte differs from the deep copy's")

    def test_the_export_leaves_the_eager_models_values(self):
        decoder = dm.TinyDecoder()
        before = {k: v.clone() for k, v in decoder.state_dict().items()}
        _export(decoder)
        after = decoder.state_dict()
        self.assertEqual(before.keys(), after.keys())
        for name, value in before.items():
            self.assertTrue(torch.equal(value, after[name]), name)


if __name__ == "__main__":
    absltest.main()
