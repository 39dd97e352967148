"""Quantized weights through the delegate (portable engine, nested XNNPACK, on the CPU):
``export_llm(..., quantize="8da4w" | "8da8w")`` and ``executorch_trt.llm.quantize``.

* The program's logits follow the eager quantized model (the same torchao ``quantize_``) at
  every step of a prefill and 16 greedy decode steps, within ``LOGIT_TOLERANCE`` of the logits'
  scale; the greedy tokens are equal, or where they part the eager top-1/top-2 gap is within
  that tolerance (a tie XNNPACK's integer arithmetic may break the other way).
* The caches are still updated in place (0 state bytes copied per call, counted by the
  runtime), for one ``forward`` and for ``prefill``/``decode``.
* Every linear's weights are int4 (or int8) in the program: the ``.pte`` shrinks by at least
  the linears' float32 bytes times ``1 - 0.625`` (int4 plus one float32 scale per 32 weights,
  at most 0.625 bytes a weight).
* ``embedding_quantize="int8"`` / ``"int4"`` (tied and untied tables) keeps those guarantees
  and shrinks the ``.pte`` by at least 0.7 of the table's float32 bytes: the nested program
  runs ExecuTorch's quantized embedding kernel on the int table (a table folded back to float
  would not shrink).
* Weight-only quantization of a linear (no XNNPACK kernel, no ExecuTorch kernel) is refused at
  export, naming the layer; bad schemes, group sizes, dtypes are refused before any work.
"""

import copy
import os
import tempfile

import torch
from absl.testing import absltest

import delegate_library
import llm_test_models as M
from executorch_trt import llm, runtime

MAX_SEQ_LEN, CAPACITY = 8, 32
PROMPT = [M.BOS_ID, 5, 9, 13, 2, 7]
STEPS = 16
#: XNNPACK's int8 GEMM vs torchao's float simulation of it: rounding of the per-token
#: activation scale only. Relative to the largest logit.
LOGIT_TOLERANCE = 2e-2


def _linear_float_bytes(model) -> int:
    return sum(m.weight.numel() * 4 for m in model.modules() if isinstance(m, torch.nn.Linear))


def _embedding_float_bytes(model) -> int:
    return model.model.embed_tokens.weight.numel() * 4


def _tied(model):
    """``model`` (a copy) with ``lm_head`` sharing the embedding table."""
    model = copy.deepcopy(model)
    model.config.tie_word_embeddings = True
    model.lm_head.weight = model.model.embed_tokens.weight
    return model


def _eager_logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]


@delegate_library.needs_library
class QuantizedExportTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = cls._tmp.name
        cls.model = M.tiny_llama(seed=3)
        cls.float_pte = os.path.join(cls.tmp, "float.pte")
        llm.export_llm(cls.model, MAX_SEQ_LEN, max_context_len=CAPACITY, output=cls.float_pte)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def _export(self, scheme, model=None, label="model", **kwargs):
        """Exports ``model`` (default ``self.model``; ``label`` names it in the file name)."""
        model = self.model if model is None else model
        tag = "-".join(map(str, (scheme, label, *kwargs.values())))
        path = os.path.join(self.tmp, f"{tag}.pte")
        before = copy.deepcopy(model.state_dict())
        if not os.path.exists(path):  # the same export, made by an earlier test
            llm.export_llm(
                model,
                MAX_SEQ_LEN,
                max_context_len=CAPACITY,
                output=path,
                quantize=scheme,
                **kwargs,
            )
        # The instance is not changed: quantized on a copy.
        for name, value in model.state_dict().items():
            self.assertTrue(torch.equal(value, before[name]), name)
        reference = copy.deepcopy(model)
        embedding = kwargs.get("embedding_quantize")
        quantized = llm.quantize(reference, scheme, kwargs.get("group_size", 32), embedding)
        # 7 linears per layer and lm_head, then the embedding table.
        self.assertLen(quantized, 15 if embedding is None else 16)
        return path, reference

    def _check_generation(self, path, reference):
        program = llm.load(path)
        session = program.new_session()
        ids = list(PROMPT)
        copied_before = runtime.bytes_copied()
        logits = session.prefill(ids)
        for step in range(STEPS + 1):
            expected = _eager_logits(reference, ids)
            scale = float(expected.abs().max())
            got = torch.as_tensor(logits).reshape(-1)
            self.assertLessEqual(
                float((got - expected).abs().max()), LOGIT_TOLERANCE * scale, f"step {step}"
            )
            token = int(got.argmax())
            if token != int(expected.argmax()):
                top2 = expected.topk(2).values
                self.assertLessEqual(float(top2[0] - top2[1]), LOGIT_TOLERANCE * scale, step)
            if step == STEPS:
                break
            ids.append(token)
            logits = session.decode(token)
        self.assertEqual(runtime.bytes_copied() - copied_before, 0)

    def test_8da4w_follows_the_eager_quantized_model_in_place(self):
        path, reference = self._export("8da4w")
        self._check_generation(path, reference)
        saved = os.path.getsize(self.float_pte) - os.path.getsize(path)
        self.assertGreaterEqual(saved, (1 - 0.625) * _linear_float_bytes(self.model))

    def test_8da8w_per_channel_with_prefill_and_decode_methods(self):
        path, reference = self._export("8da8w", group_size=0, prefill_decode=True)
        program = llm.load(path)
        self.assertEqual((program.prefill_method, program.decode_method), ("prefill", "decode"))
        self._check_generation(path, reference)

    def test_int8_and_int4_embeddings_tied_and_untied(self):
        float_bytes = _embedding_float_bytes(self.model)
        linears_only, _ = self._export("8da4w")
        for tied, embedding in ((False, "int4"), (True, "int8")):
            model = _tied(self.model) if tied else self.model
            with self.subTest(tied=tied, embedding=embedding):
                path, reference = self._export(
                    "8da4w", model, f"tied={tied}", embedding_quantize=embedding
                )
                self.assertIsNot(type(reference.model.embed_tokens.weight), torch.Tensor)
                self._check_generation(path, reference)
                saved = os.path.getsize(linears_only) - os.path.getsize(path)
                self.assertGreaterEqual(saved, 0.7 * float_bytes)

    def test_weight_only_quantization_is_refused_naming_the_layer(self):
        from torchao.quantization import quantize_
        from torchao.quantization.granularity import PerAxis
        from torchao.quantization.quant_api import IntxWeightOnlyConfig

        model = copy.deepcopy(self.model)
        quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)))
        with self.assertRaisesRegex(
            ValueError,
            r"torchao::dequantize_affine at '.*layers\.0\.self_attn\.q_proj' is not part of a "
            r"quantized linear XNNPACK runs.*IntxWeightOnlyConfig \(int8, int4\) on "
            r"nn\.Embedding tables only; weight-only linears are not supported",
        ):
            llm.export_llm(model, MAX_SEQ_LEN, max_context_len=CAPACITY)

    def test_bad_schemes_group_sizes_and_dtypes_are_refused(self):
        model = copy.deepcopy(self.model)
        for kwargs, message in (
            (dict(scheme="4w"), r"unknown scheme '4w'; expected one of 8da4w, 8da8w"),
            (dict(group_size=48), r"a power of two >= 32 .*, got 48"),
            (dict(group_size=16), r"a power of two >= 32 .*, got 16"),
            (dict(scheme="8da8w"), r"8da8w takes one scale per output channel.*got 32"),
            (
                dict(scheme="8da8w", group_size=0, embedding="int4"),
                r"embedding='int4' needs a group size, which 8da8w's linears cannot take",
            ),
            (dict(group_size=128), r"divides the in_features of no linear \(widths \[32, 64\]\)"),
            (dict(embedding="int2"), r"unknown embedding scheme 'int2'; expected one of int8"),
            (dict(embedding="int4", group_size=0), r"embedding='int4' needs a group size"),
            (
                dict(embedding="int4", group_size=64),
                r"group_size 64 does not divide the embedding widths \[32\]",
            ),
        ):
            with self.subTest(kwargs), self.assertRaisesRegex(ValueError, message):
                llm.quantize(model, **kwargs)
        with self.assertRaisesRegex(ValueError, r"must be float32.*torch\.bfloat16"):
            llm.quantize(copy.deepcopy(self.model).to(torch.bfloat16))
        with self.assertRaisesRegex(ValueError, r"embedding_quantize needs quantize"):
            llm.export_llm(model, MAX_SEQ_LEN, embedding_quantize="int8")
        # Nothing was quantized by the refusals.
        self.assertIs(type(model.lm_head.weight.data), torch.Tensor)
        self.assertIs(type(model.model.embed_tokens.weight.data), torch.Tensor)


if __name__ == "__main__":
    absltest.main()
