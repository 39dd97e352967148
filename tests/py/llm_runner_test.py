"""ExecuTorch's own LLM runner (``executorch.extension.llm.runner.TextLLMRunner``, from the
pinned wheel) on a program ``executorch_trt.llm.export_llm`` wrote from a ``save_pretrained``
directory of a seeded random Llama.

Greedy generation (temperature 0) through the runner on the delegate's program gives exactly
the text the same runner gives on the plain ExecuTorch program of the same model
(``to_edge_transform_and_lower`` with XNNPACK, no delegate of ours), and the text of eager
greedy decoding (the plain model's no-cache forward over the whole sequence at every step,
decoded with the same C++ tokenizer). A second ``generate`` after ``reset()`` gives the first
text again. The runner calls the single ``forward`` with the whole prompt, then T = 1 per token.
The program's delegate runs on the portable engine (nested ExecuTorch program with XNNPACK,
on the CPU). ``import executorch_trt`` is all the runner needs to find TensorRTBackend.

On a ``prefill_decode`` program the runner loads ``prefill`` and ``decode`` each with its own
planned memory, so ``decode`` never sees the cache ``prefill`` wrote (docs/guide/llm.md).
"""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
import llm_test_models as M
from executorch_trt.llm import export_llm
from executorch_trt.llm.decoder_programs import export_decoder_methods
from executorch_trt.llm.metadata import llm_metadata

MAX_SEQ_LEN = 48
PROMPT = "hello world, this is a test."
NEW_TOKENS = 12


def _plain_executorch_program(model, path):
    """The same model as a plain ExecuTorch program: transformers' wrapper exported the same
    way, lowered with XNNPACK (ExecuTorch copies the cache back), the same metadata methods."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    methods = export_decoder_methods(model, MAX_SEQ_LEN, MAX_SEQ_LEN)
    program = to_edge_transform_and_lower(
        methods,
        partitioner=[XnnpackPartitioner()],
        constant_methods=llm_metadata(model, MAX_SEQ_LEN, MAX_SEQ_LEN),
    ).to_executorch()
    with open(path, "wb") as f:
        f.write(program.buffer)
    return program


@delegate_library.needs_library
class TextLLMRunnerTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        from pytorch_tokenizers import CppTiktoken

        tmp = cls.enterClassContext(tempfile.TemporaryDirectory())
        model = M.tiny_llama(seed=0)
        checkpoint = M.save_checkpoint(model, os.path.join(tmp, "checkpoint"))
        cls.tokenizer_path = M.write_tokenizer(os.path.join(tmp, "tokenizer.model"))
        cls.product_path = os.path.join(tmp, "product.pte")
        cls.plain_path = os.path.join(tmp, "plain.pte")
        cls.product = export_llm(checkpoint, MAX_SEQ_LEN, output=cls.product_path)
        cls.plain = _plain_executorch_program(model, cls.plain_path)

        tokenizer = CppTiktoken()
        tokenizer.load(cls.tokenizer_path)
        prompt_ids = tokenizer.encode(PROMPT, 0, 0)
        cls.eager_tokens = M.greedy_tokens(model, prompt_ids, NEW_TOKENS, eos_ids={M.EOS_ID})
        cls.eager_text = "".join(tokenizer.decode(t) for t in cls.eager_tokens)

    def _generate(self, runner):
        from executorch.extension.llm.runner import GenerationConfig

        pieces = []
        runner.generate(
            PROMPT,
            GenerationConfig(max_new_tokens=NEW_TOKENS, temperature=0.0, echo=False),
            token_callback=pieces.append,
        )
        return pieces

    def _runner(self, path):
        from executorch.extension.llm.runner import TextLLMRunner

        return TextLLMRunner(path, self.tokenizer_path)

    def test_the_program_is_the_delegate_s_and_copies_no_state(self):
        report = executorch_trt.inspect(self.product)
        self.assertEqual(report.method("forward").delegate_calls, {"TensorRTBackend": 1})
        self.assertEqual(report.summary.engines, {"portable": 1})
        self.assertTrue(report.summary.zero_copy, str(report))
        plain = executorch_trt.inspect(self.plain)
        self.assertNotIn("TensorRTBackend", plain.method("forward").delegate_calls)

    def test_reference_generates_the_requested_tokens(self):
        # Guards the comparisons below: eager greedy decoding ran the whole length and the
        # text has several distinct pieces (so equal texts are not equal by accident).
        self.assertLen(self.eager_tokens, NEW_TOKENS)
        self.assertGreater(len(set(self.eager_tokens)), 3, self.eager_tokens)

    def test_greedy_text_equals_plain_executorch_and_eager(self):
        product = self._generate(self._runner(self.product_path))
        plain = self._generate(self._runner(self.plain_path))
        self.assertLen(product, NEW_TOKENS)
        self.assertEqual("".join(product), "".join(plain), "runner: delegate vs plain program")
        self.assertEqual("".join(product), self.eager_text, "runner on the delegate vs eager")

    def test_generate_after_reset_equals_the_first(self):
        runner = self._runner(self.product_path)
        first = self._generate(runner)
        runner.reset()
        second = self._generate(runner)
        self.assertEqual(second, first)
        self.assertEqual("".join(first), self.eager_text)


@delegate_library.needs_library
class PrefillDecodeProgramTest(absltest.TestCase):
    """ExecuTorch 1.5.1's ``TextLLMRunner`` builds its ``Module`` without
    ``share_memory_arenas``: on a program with ``prefill`` and ``decode`` it generates the
    tokens of those methods run each in its own planned memory (here ``portable_lib``, which
    does the same), not eager's, with no error. docs/guide/llm.md says so and points such
    programs at ``executorch_trt.llm``; when this test fails, update that page."""

    @classmethod
    def setUpClass(cls):
        from pytorch_tokenizers import CppTiktoken

        tmp = cls.enterClassContext(tempfile.TemporaryDirectory())
        # Seed 1: a model whose greedy text depends on the prompt's cache (with seed 0 the
        # text happens to be the same without it).
        cls.model = M.tiny_llama(seed=1)
        cls.tokenizer_path = M.write_tokenizer(os.path.join(tmp, "tokenizer.model"))
        cls.path = os.path.join(tmp, "prefill_decode.pte")
        export_llm(cls.model, MAX_SEQ_LEN, prefill_decode=True, output=cls.path)
        cls.tokenizer = CppTiktoken()
        cls.tokenizer.load(cls.tokenizer_path)
        cls.prompt_ids = cls.tokenizer.encode(PROMPT, 0, 0)
        cls.eager_tokens = M.greedy_tokens(cls.model, cls.prompt_ids, NEW_TOKENS, {M.EOS_ID})

    def _text(self, tokens):
        return "".join(self.tokenizer.decode(t) for t in tokens)

    def _tokens_with_separate_memory(self):
        from executorch.extension.pybindings.portable_lib import _load_for_executorch

        module = _load_for_executorch(self.path)
        ids = self.prompt_ids
        logits = module.run_method("prefill", [torch.tensor([ids]), torch.arange(len(ids))])[0]
        tokens = [int(logits[0, -1].argmax())]
        while len(tokens) < NEW_TOKENS and tokens[-1] != M.EOS_ID:
            position = torch.tensor([len(ids) + len(tokens) - 1])
            logits = module.run_method("decode", [torch.tensor([tokens[-1:]]), position])[0]
            tokens.append(int(logits[0, -1].argmax()))
        return tokens

    def test_the_runner_decodes_without_prefill_s_cache(self):
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

        pieces = []
        TextLLMRunner(self.path, self.tokenizer_path).generate(
            PROMPT,
            GenerationConfig(max_new_tokens=NEW_TOKENS, temperature=0.0, echo=False),
            token_callback=pieces.append,
        )
        separate = self._tokens_with_separate_memory()
        self.assertEqual("".join(pieces), self._text(separate))
        self.assertEqual(separate[0], self.eager_tokens[0], "prefill's own token is right")
        self.assertNotEqual(separate, self.eager_tokens)

    def test_a_session_runs_the_program_as_eager(self):
        from executorch_trt import llm

        session = llm.load(self.path).new_session()
        session.prefill(self.prompt_ids)
        tokens = list(session.generate(NEW_TOKENS, stop_tokens=[M.EOS_ID]))
        self.assertEqual(tokens, self.eager_tokens)


if __name__ == "__main__":
    absltest.main()
