"""The ``chat`` command (``./bazelw run //:chat``; tools/chat.py runs
``executorch_trt.llm.chat.main``) on a tiny Llama exported by ``export_llm`` with a character
tokenizer (a HF ``tokenizer.json``, and the same vocabulary as a tiktoken file).

* One turn streams eager greedy decoding's text and reports the statistics and the engine.
* ``--session FILE``: two turns in two processes give the text of one process holding both
  turns (stdin), and the file then holds every token.
* Each bad input exits 2 naming it; a running program that fails exits 1.
"""

import io
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

from absl.testing import absltest

import delegate_library
import llm_test_models as M
from executorch_trt import llm
from executorch_trt.llm import chat

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "chat.py")


def _hf_tokenizer(path):
    """``tokenizer.json`` of llm_test_models' vocabulary: one token per character, then BOS
    and EOS."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    vocab = {c: i for i, c in enumerate(M.TOKEN_CHARS)}
    vocab["<s>"], vocab["</s>"] = M.BOS_ID, M.EOS_ID
    tokenizer = Tokenizer(models.BPE(vocab, [], unk_token=None))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(
        [AddedToken("<s>", special=True), AddedToken("</s>", special=True)]
    )
    tokenizer.save(path)
    return path


def _text(ids):
    return "".join(M.TOKEN_CHARS[i] for i in ids if i < len(M.TOKEN_CHARS))


@delegate_library.needs_library
class ChatTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = cls.enterClassContext(tempfile.TemporaryDirectory())
        cls.model = M.tiny_llama(seed=2)
        cls.pte = os.path.join(cls.tmp, "tiny.pte")
        with open(cls.pte, "wb") as f:
            f.write(llm.export_llm(cls.model, 16, max_context_len=64).buffer)
        cls.tokenizer = _hf_tokenizer(os.path.join(cls.tmp, "tokenizer.json"))
        cls.tiktoken = M.write_tokenizer(os.path.join(cls.tmp, "tokenizer.model"))

    def _model_args(self, max_new_tokens):
        return [
            "--model",
            self.pte,
            "--tokenizer",
            self.tokenizer,
            "--max-new-tokens",
            max_new_tokens,
        ]

    def _main(self, *args, stdin=""):
        out, err = io.StringIO(), io.StringIO()
        status = chat.main(["chat", *args], io.StringIO(stdin), out, err)
        return status, out.getvalue(), err.getvalue()

    def _process(self, *args, stdin=""):
        return subprocess.run(
            [sys.executable, LAUNCHER, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )

    def _greedy_text(self, prompt_text, max_new_tokens, before=()):
        ids = list(before) or [M.BOS_ID]
        ids += [M.TOKEN_CHARS.index(c) for c in prompt_text]
        new = M.greedy_tokens(self.model, ids, max_new_tokens, eos_ids=(M.EOS_ID,))
        return _text(new), ids + new

    def test_one_turn_streams_eager_greedy_text_and_its_statistics(self):
        for tokenizer in (self.tokenizer, self.tiktoken):
            with self.subTest(tokenizer=os.path.basename(tokenizer)):
                status, out, err = self._main(
                    "--model",
                    self.pte,
                    "--tokenizer",
                    tokenizer,
                    "--prompt",
                    "hello there",
                    "--max-new-tokens",
                    "12",
                )
                self.assertEqual(status, 0, err)
                want, _ = self._greedy_text("hello there", 12)
                self.assertEqual(out, want + "\n")
                self.assertIn(
                    "engine portable (nested ExecuTorch program with XNNPACK, on the CPU)", err
                )
                self.assertRegex(
                    err,
                    r"prompt 12 tokens \(0 reused from the prefix cache\), "
                    r"time to first token [0-9.]+ ms, prefill [0-9.]+ tok/s, "
                    r"generated \d+ tokens, decode [0-9.]+ tok/s; the "
                    r"session holds \d+ of 64 positions",
                )

    def test_a_session_file_survives_a_restart(self):
        path = os.path.join(self.create_tempdir().full_path, "chat.session")
        common = [*self._model_args("6"), "--session", path]
        first = self._process(*common, "--prompt", "the cat")
        second = self._process(*common, "--prompt", " sat.")
        self.assertEqual(
            (first.returncode, second.returncode), (0, 0), first.stderr + second.stderr
        )
        self.assertIn("resumed", second.stderr)
        status, together, err = self._main(*self._model_args("6"), stdin="the cat\n sat.\n")
        self.assertEqual(status, 0, err)
        self.assertEqual(first.stdout + second.stdout, together)
        turn1, ids = self._greedy_text("the cat", 6)
        self.assertEqual(first.stdout, turn1 + "\n")
        turn2, ids = self._greedy_text(" sat.", 6, before=ids)
        self.assertEqual(second.stdout, turn2 + "\n")
        saved = llm.load(self.pte).load_session(path)
        self.assertEqual(saved.tokens, ids)

    def test_bad_input_exits_2_naming_it(self):
        other = os.path.join(self.create_tempdir().full_path, "other.session")
        with open(other, "wb") as f:
            f.write(b"not a session" * 10)
        cases = [
            ([], "--model is required"),
            (["--model", self.pte], "--tokenizer is required"),
            (
                ["--model", "/nonexistent.pte", "--tokenizer", self.tokenizer],
                "--model /nonexistent.pte: no such file",
            ),
            (["--model", self.pte, "--tokenizer", self.pte], "no pytorch_tokenizers loader"),
            (["--model", self.tokenizer, "--tokenizer", self.tokenizer], "chat: "),
            (
                ["--model", self.pte, "--tokenizer", self.tokenizer, "--session", other],
                "not a session file",
            ),
            (
                ["--model", self.pte, "--tokenizer", self.tokenizer, "--max-new-tokens", "-1"],
                "max-new-tokens",
            ),
            (["--model", self.pte, "--tokenizer", self.tokenizer, "extra"], "unexpected arguments"),
            (
                ["--model", self.pte, "--tokenizer", self.tokenizer, "--prompt", "a" * 80],
                "tokens do not fit",
            ),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                status, _out, err = self._main(*args)
                self.assertEqual(status, 2, err)
                self.assertIn(message, err)
        done = self._process("--model", "/nonexistent.pte", "--tokenizer", self.tokenizer)
        self.assertEqual(done.returncode, 2, done.stderr)

    def test_a_turn_that_is_not_utf8_exits_2_naming_it(self):
        # Python keeps bytes of argv (and of stdin in a C locale) that do not decode as
        # surrogate escapes: "\xff" arrives as "\udcff".
        for args, stdin in ((["--prompt", "the \udcff cat"], ""), ([], "the \udcff cat\n")):
            with self.subTest(args=args):
                status, _out, err = self._main(*self._model_args("2"), *args, stdin=stdin)
                self.assertEqual(status, 2, err)
                self.assertIn("the turn is not UTF-8 text", err)

    def test_a_turn_cut_short_by_a_full_cache_says_so(self):
        prompt = "ab" * 30  # BOS + 60 tokens: 3 of the 10 asked for fit in 64 positions
        want, ids = self._greedy_text(prompt, 3)
        self.assertEqual(len(ids), 64, "the greedy continuation must not end before the cache")
        status, out, err = self._main(*self._model_args("10"), "--prompt", prompt)
        self.assertEqual(status, 0, err)
        self.assertEqual(out, want + "\n")
        self.assertIn("stopped early: the cache is full", err)
        status, _, err = self._main(*self._model_args("3"), "--prompt", prompt)
        self.assertNotIn("stopped early", err)

    def test_help(self):
        status, out, _ = self._main("--help")
        self.assertEqual(status, 0)
        flags_listed = out.split("\nflags:\n", 1)[1]
        for flag in ("--model:", "--tokenizer:", "--session:", "--prefix-cache-bytes:"):
            self.assertIn(flag, flags_listed)


if __name__ == "__main__":
    absltest.main()
