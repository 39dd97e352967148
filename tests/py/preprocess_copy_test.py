"""What ``preprocess`` is given: the partition's graph copied, its tensors shared.

ExecuTorch copies every partition of every method before preprocessing any of them, with
``BackendDetails.copy_exported_program_for_preprocess`` (a deep copy unless the backend says
otherwise). ``TensorRTBackend`` copies the graph and shares the tensors, since ``preprocess``
never writes them (``backend/preprocess.py``). On the small decoder of ``decoder_models``
(prefill, decode and read_state; weights and mutable buffers):

* every weight a ``preprocess`` call sees is the eager model's own tensor (its storage), not a
  copy;
* the ``.pte`` is byte for byte the one ExecuTorch's default deep copy gives, and so is the
  prefill/decode program of a Llama with 8da4w linears and an int8 embedding table (torchao's
  quantized weights, left unchanged by the export);
* the eager model's parameters and buffers keep their values through the export.
"""

import copy
import unittest.mock
import warnings

import torch
from absl.testing import absltest

import decoder_models as dm
import executorch_trt
import llm_test_models as M
from executorch_trt import llm
from executorch_trt.backend import preprocess as preprocess_module
from executorch_trt.backend.preprocess import TensorRTBackend
from executorch_trt.llm.decoder_programs import export_decoder_methods


def _export(decoder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return executorch_trt.export(dm.export_methods(decoder))


def _deep_copies():
    """``TensorRTBackend`` copying partitions as ExecuTorch's default does (``copy.deepcopy``),
    for the duration of a ``with`` block."""
    deep = classmethod(lambda cls, edge_program, compile_specs: copy.deepcopy(edge_program))
    return unittest.mock.patch.object(TensorRTBackend, "copy_exported_program_for_preprocess", deep)


def _storages(module: torch.nn.Module) -> dict[str, int]:
    """``{fqn: data pointer of its storage}`` of every parameter and buffer of ``module``."""
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return {name: t.untyped_storage().data_ptr() for name, t in tensors.items()}


def _plain(t: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors holding ``t``'s values: a tensor subclass's inner tensors (torchao's
    ``qdata``, ``scale``, ...), or ``t`` itself."""
    if hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return [getattr(t, n) for n in names]
    return [t]


class PreprocessCopyTest(absltest.TestCase):
    def test_preprocess_sees_the_eager_models_tensors(self):
        decoder = dm.TinyDecoder()
        # The methods wrap the decoder as attribute ``m`` (decoder_models.Step, ReadState).
        eager = {f"m.{name}": pointer for name, pointer in _storages(decoder).items()}
        seen: list[dict[str, int]] = []
        analyse = preprocess_module._analyse

        def recording(where, edge_program, compile_specs):
            sig = edge_program.graph_signature
            names = [*sig.inputs_to_parameters.values(), *sig.inputs_to_buffers.values()]
            seen.append({n: edge_program.state_dict[n].untyped_storage().data_ptr() for n in names})
            return analyse(where, edge_program, compile_specs)

        with unittest.mock.patch.object(preprocess_module, "_analyse", recording):
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
        with _deep_copies():
            copied = _export(decoder).buffer
        self.assertEqual(len(shared), len(copied))
        self.assertTrue(shared == copied, "the .pte differs from the deep copy's")

    def test_a_quantized_program_equals_the_one_a_deep_copy_gives(self):
        # torchao's quantized weights (tensor subclasses) shared with the partition, as
        # export_llm(quantize="8da4w", embedding_quantize="int8") lowers them.
        model = M.tiny_llama(seed=3)
        llm.quantize(model, "8da4w", 32, "int8")
        before = {k: [t.clone() for t in _plain(v)] for k, v in model.state_dict().items()}

        def export() -> bytes:
            methods = export_decoder_methods(model, 8, 32, prefill_decode=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return executorch_trt.export(methods).buffer

        shared = export()
        for name, value in model.state_dict().items():
            for got, want in zip(_plain(value), before[name], strict=True):
                self.assertTrue(torch.equal(got, want), name)
        with _deep_copies():
            copied = export()
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
