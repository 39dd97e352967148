"""The ``export_llm`` command (``./bazelw run //:export_llm``; tools/export_llm.py, which runs
``executorch_trt.llm.cli.main``).

* Success, as a process: a ``save_pretrained`` directory of a seeded random Llama exported
  with ``--prefill-decode --data``: exit 0, one progress line per stage naming the engine, the
  ``.pte`` and ``.ptd`` written; the program, loaded with its data file through
  ``executorch_trt.runtime`` (portable engine, on the CPU), runs prefill then decode like the
  plain model's no-cache forward; ExecuTorch's ``TextLLMRunner`` (pte, tokenizer, ptd) on it
  generates eager greedy decoding's text.
* Each bad input exits 2 with a message naming the problem (``main()`` in this process, and
  once as a process to see the exit status reach the shell).
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import torch
from absl.testing import absltest

import delegate_library
import llm_test_models as M
from executorch_trt import runtime
from executorch_trt.llm import (
    SUPPORTED_ARCHITECTURES,
    cli,
)

LAUNCHER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "export_llm.py"
)
MAX_SEQ_LEN = 16


def _run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["export_llm", *argv])
    return status, out.getvalue(), err.getvalue()


class _Checkpoint:
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = cls._tmp.name
        cls.model = M.tiny_llama(seed=1)
        cls.model_dir = M.save_checkpoint(cls.model, os.path.join(cls.tmp, "llama"))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()
        super().tearDownClass()


@delegate_library.needs_library
class ExportLlmCommandTest(_Checkpoint, absltest.TestCase):
    def test_exports_prefill_decode_with_external_weights(self):
        pte, ptd = os.path.join(self.tmp, "model.pte"), os.path.join(self.tmp, "model.ptd")
        done = subprocess.run(
            [
                sys.executable,
                LAUNCHER,
                "--model-dir",
                self.model_dir,
                "--max-seq-len",
                str(MAX_SEQ_LEN),
                "--output",
                pte,
                "--data",
                ptd,
                "--prefill-decode",
                "--generate-full-logits",
            ],
            capture_output=True,
            text=True,
            env=delegate_library.subprocess_env(),
            timeout=600,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        lines = [line for line in done.stdout.splitlines() if line.startswith("export_llm: ")]
        self.assertEqual(
            [line.split()[1] for line in lines],
            ["loading", "exporting", "lowering", "program:", "wrote", "wrote"],
            done.stdout,
        )
        self.assertIn("LlamaForCausalLM", lines[1])
        self.assertIn("prefill + decode, T in [1, 16]", lines[1])
        self.assertIn(
            "engine portable (nested ExecuTorch program with XNNPACK, on the CPU)", lines[3]
        )
        self.assertIn(pte, lines[4])
        self.assertIn(ptd, lines[5])
        # The weights went to the data file: it holds them all, the program cannot run alone.
        weights = sum(p.numel() * 4 for p in self.model.parameters())
        self.assertGreaterEqual(os.path.getsize(ptd), weights)
        with self.assertRaisesRegex(RuntimeError, "no data file was given; pass the .ptd"):
            runtime.load(pte)

        loaded = runtime.load(pte, data=ptd)
        self.assertEqual(loaded.load_method("get_max_seq_len").execute([]), [MAX_SEQ_LEN])
        prompt = torch.tensor([[5, 9, 14, 3, 30]])
        # --generate-full-logits: the prompt's every token, [1, 5, vocab].
        (got,) = loaded.load_method("prefill").execute([prompt, torch.arange(5)])
        token = torch.tensor([[int(got[0, -1].argmax())]])
        (got_step,) = loaded.load_method("decode").execute([token, torch.tensor([5])])
        with torch.no_grad():
            want = self.model(input_ids=torch.cat([prompt, token], 1), use_cache=False).logits
        scale = max(1.0, float(want.abs().max()))
        torch.testing.assert_close(got, want[:, :5], atol=1e-4 * scale, rtol=0)
        torch.testing.assert_close(got_step, want[:, 5:], atol=1e-4 * scale, rtol=0)

        # ExecuTorch's LLM runner takes the two-method form with its data file too: prefill
        # for the prompt, decode per token, the text of eager greedy decoding.
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
        from pytorch_tokenizers import CppTiktoken

        tokenizer_path = M.write_tokenizer(os.path.join(self.tmp, "tokenizer.model"))
        tokenizer = CppTiktoken()
        tokenizer.load(tokenizer_path)
        prompt_text, new_tokens = "hello there", 4
        eager = M.greedy_tokens(
            self.model, tokenizer.encode(prompt_text, 0, 0), new_tokens, eos_ids={M.EOS_ID}
        )
        pieces = []
        TextLLMRunner(pte, tokenizer_path, ptd).generate(
            prompt_text,
            GenerationConfig(max_new_tokens=new_tokens, temperature=0.0, echo=False),
            token_callback=pieces.append,
        )
        self.assertLen(pieces, new_tokens)
        self.assertEqual("".join(pieces), "".join(tokenizer.decode(t) for t in eager))

    def test_quantize_reaches_the_export(self):
        pte = os.path.join(self.tmp, "8da4w.pte")
        argv = ["--model-dir", self.model_dir, "--max-seq-len", "8", "--output", pte]
        status, out, err = _run_main(
            [*argv, "--quantize", "8da4w", "--group-size", "32", "--embedding-quantize", "int8"]
        )
        self.assertEqual(status, 0, err)
        self.assertIn(
            "export_llm: quantized 15 linears (8da4w, group size 32) and 1 embedding table (int8)",
            out,
        )
        float_pte = os.path.join(self.tmp, "float.pte")
        status, out, err = _run_main([*argv[:-1], float_pte])
        self.assertEqual(status, 0, err)
        self.assertNotIn("quantized", out)
        self.assertLess(os.path.getsize(pte), os.path.getsize(float_pte))

    def test_bad_usage_exit_status_reaches_the_shell(self):
        missing = os.path.join(self.tmp, "missing")
        done = subprocess.run(
            [
                sys.executable,
                LAUNCHER,
                "--model-dir",
                missing,
                "--max-seq-len",
                "16",
                "--output",
                os.path.join(self.tmp, "x.pte"),
            ],
            capture_output=True,
            text=True,
            env=delegate_library.subprocess_env(),
            timeout=600,
        )
        self.assertEqual(done.returncode, 2, done.stderr[-3000:])
        self.assertIn(f"model directory {missing} does not exist", done.stderr)


class BadInputTest(_Checkpoint, absltest.TestCase):
    """``main()`` returns 2 and prints the problem and the usage, before exporting anything."""

    def assert_usage_error(self, argv, *fragments):
        status, out, err = _run_main(argv)
        self.assertEqual(status, 2, err)
        for fragment in fragments:
            self.assertIn(fragment, err)
        self.assertIn("usage: ./bazelw run //:export_llm", err)
        self.assertNotIn("export_llm: export_llm:", err)  # one prefix per message
        self.assertNotIn("loading", out)

    def _args(self, **overrides):
        args = {
            "--model-dir": self.model_dir,
            "--max-seq-len": "16",
            "--output": os.path.join(self.tmp, "out.pte"),
        }
        args.update(overrides)
        return [x for k, v in args.items() if v is not None for x in (k, v)]

    def test_required_flags(self):
        self.assert_usage_error([], "--model-dir is required")
        self.assert_usage_error(self._args(**{"--max-seq-len": None}), "--max-seq-len is required")
        self.assert_usage_error(self._args(**{"--output": None}), "--output is required")

    def test_malformed_flags(self):
        self.assert_usage_error([*self._args(), "--bogus"], "Unknown command line flag 'bogus'")
        self.assert_usage_error(self._args(**{"--max-seq-len": "ten"}), "--max-seq-len=ten")
        self.assert_usage_error(self._args(**{"--max-seq-len": "1"}), "--max-seq-len=1", ">= 2")
        self.assert_usage_error(self._args(**{"--engine": "cuda"}), "--engine=cuda")
        self.assert_usage_error([*self._args(), "stray"], "unexpected arguments ['stray']")

    def test_missing_model_directory(self):
        missing = os.path.join(self.tmp, "no_such_dir")
        self.assert_usage_error(
            self._args(**{"--model-dir": missing}), f"model directory {missing} does not exist"
        )

    def test_no_config_json(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        self.assert_usage_error(
            self._args(**{"--model-dir": empty}), f"model directory {empty} has no config.json"
        )

    def test_unsupported_architecture(self):
        opt = os.path.join(self.tmp, "opt")
        M.tiny_opt_config(architectures=["OPTForCausalLM"]).save_pretrained(opt)
        self.assert_usage_error(
            self._args(**{"--model-dir": opt}),
            "OPTForCausalLM (model_type 'opt') is not supported",
            *SUPPORTED_ARCHITECTURES.values(),
        )

    def test_no_safetensors(self):
        bare = os.path.join(self.tmp, "bare")
        os.makedirs(bare, exist_ok=True)
        with open(os.path.join(self.model_dir, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(bare, "config.json"), "w") as f:
            json.dump(config, f)
        status, _, err = _run_main(self._args(**{"--model-dir": bare}))
        self.assertEqual(status, 2, err)
        self.assertIn(f"model directory {bare} has no *.safetensors weights", err)

    def test_output_directory_missing(self):
        out = os.path.join(self.tmp, "no_dir", "m.pte")
        self.assert_usage_error(
            self._args(**{"--output": out}), f"directory {os.path.dirname(out)} does not exist"
        )

    def test_context_beyond_the_model_s_positions(self):
        self.assert_usage_error(
            self._args(**{"--max-context-len": "65"}),
            "max_context_len 65 is beyond the model's max_position_embeddings 64",
        )

    def test_bad_quantization(self):
        self.assert_usage_error(self._args(**{"--quantize": "4w"}), "--quantize=4w")
        self.assert_usage_error(
            self._args(**{"--quantize": "8da4w", "--group-size": "48"}),
            "group_size must be 0 (per output channel) or a power of two >= 32",
        )
        self.assert_usage_error(
            self._args(**{"--quantize": "8da8w"}),
            "8da8w takes one scale per output channel",
        )
        self.assert_usage_error(self._args(**{"--group-size": "-1"}), "--group-size=-1")
        self.assert_usage_error(
            self._args(**{"--quantize": "8da8w", "--group-size": "0", "--dtype": "float16"}),
            "--quantize 8da8w needs --dtype float32",
        )
        self.assert_usage_error(
            self._args(**{"--embedding-quantize": "int8"}), "--embedding-quantize needs --quantize"
        )
        self.assert_usage_error(
            self._args(**{"--quantize": "8da4w", "--embedding-quantize": "int2"}),
            "--embedding-quantize=int2",
        )
        self.assert_usage_error(
            self._args(
                **{"--quantize": "8da4w", "--group-size": "0", "--embedding-quantize": "int4"}
            ),
            "embedding='int4' needs a group size",
        )

    def test_help_exits_0(self):
        status, out, _ = _run_main(["--help"])
        self.assertEqual(status, 0)
        self.assertIn("--model-dir", out)
        self.assertIn("--prefill-decode", out)
        self.assertIn("--quantize", out)


if __name__ == "__main__":
    absltest.main()
