"""The ``chat`` command (``./bazelw run //:chat``; tools/chat.py runs
``executorch_trt.llm.chat.main``) on a tiny Llama exported by ``export_llm`` with a character
tokenizer (a HF ``tokenizer.json``, and the same vocabulary as a tiktoken file).

* One turn streams eager greedy decoding's text and reports the statistics and the engine.
* ``--session FILE``: two turns in two processes give the text of one process holding both
  turns (stdin), and the file then holds every token.
* Each bad input exits 2 naming it; a running program that fails exits 1.
* With byte-level tokenizers (a HF ``tokenizer.json`` and a tiktoken file), characters whose
  UTF-8 bytes are separate tokens stream whole; a generated token the tokenizer does not have
  exits 2 naming it.
"""

import io
import itertools
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


def _save_tokenizer(path, vocab, byte_level=False):
    """A HF ``tokenizer.json`` of ``vocab`` (``{piece: id}``, no merges) with ``<s>`` and
    ``</s>`` as special tokens after it, pieces fused on decoding or, with ``byte_level``,
    GPT-2's byte-level pieces; returns the tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE(vocab, [], unk_token=None))
    if byte_level:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
    else:
        tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(
        [AddedToken("<s>", special=True), AddedToken("</s>", special=True)]
    )
    tokenizer.save(path)
    return tokenizer


def _hf_tokenizer(path):
    """``tokenizer.json`` of llm_test_models' vocabulary: one token per character, then BOS
    and EOS."""
    vocab = {c: i for i, c in enumerate(M.TOKEN_CHARS)}
    vocab["<s>"], vocab["</s>"] = M.BOS_ID, M.EOS_ID
    _save_tokenizer(path, vocab)
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


TEXT = "café ☕!"  # one-, two- and three-byte characters
# SentencePiece's text has no space: its "▁" piece would come twice in the chain.
SP_TEXT = "café☕!"
BYTE_BOS, BYTE_EOS = 256, 257


def _byte_level_tokenizer(path):
    """A HF byte-level ``tokenizer.json`` (GPT-2's byte alphabet, no merges), BOS 256, EOS 257."""
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    return _save_tokenizer(path, {c: i for i, c in enumerate(alphabet)}, byte_level=True)


def _byte_tiktoken(path):
    """A tiktoken file whose token ``b`` is the byte ``b`` (its specials start at 256: BOS 256,
    EOS 257, as CppTiktoken numbers them)."""
    import base64

    with open(path, "w") as f:
        for b in range(256):
            f.write(f"{base64.b64encode(bytes([b])).decode()} {b}\n")
    return path


def _sentencepiece_model(prefix):
    """A SentencePiece BPE model with byte fallback (BOS 1, EOS 2) trained on a few words: a
    character it has not seen is its UTF-8 bytes, one token each."""
    import sentencepiece

    corpus = prefix + ".txt"
    with open(corpus, "w") as f:
        f.write("hello world, the cat sat on the mat\n" * 20)
    sentencepiece.SentencePieceTrainer.train(
        input=corpus,
        model_prefix=prefix,
        vocab_size=280,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        pad_id=-1,
        minloglevel=2,
    )
    return sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")


def _chain_model(chain, bos=BYTE_BOS, eos=BYTE_EOS, vocab=258):
    """A one-layer Llama over ``vocab`` tokens whose greedy successor of ``chain[i]`` is
    ``chain[i + 1]``: the embedding is the identity, attention and MLP add nothing, and the LM
    head maps each token to its successor."""
    import torch

    hidden = vocab + 8 - vocab % 8  # at least one dimension per token, 4 heads of even size
    model = M.llama(vocab=vocab, hidden=hidden, layers=1, kv_heads=4, bos=bos, eos=eos)
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab] = torch.eye(vocab)
        model.model.layers[0].self_attn.o_proj.weight.zero_()
        model.model.layers[0].mlp.down_proj.weight.zero_()
        model.lm_head.weight.zero_()
        for a, b in itertools.pairwise(chain):
            model.lm_head.weight[b, a] = 10.0
    return model


@delegate_library.needs_library
class ByteLevelChatTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = cls.enterClassContext(tempfile.TemporaryDirectory())
        hf = _byte_level_tokenizer(os.path.join(cls.tmp, "bytes.json"))
        cls.tokenizers = {
            "tokenizer.json": (
                os.path.join(cls.tmp, "bytes.json"),
                hf.encode("x" + TEXT, add_special_tokens=False).ids,
            ),
            "tiktoken": (
                _byte_tiktoken(os.path.join(cls.tmp, "bytes.tiktoken")),
                list(("x" + TEXT).encode()),
            ),
        }
        sp = _sentencepiece_model(os.path.join(cls.tmp, "bytes_sp"))
        cls.tokenizers["sentencepiece"] = (
            os.path.join(cls.tmp, "bytes_sp.model"),
            sp.encode("x" + SP_TEXT),
        )
        cls.programs = {}
        for name, (_, ids) in cls.tokenizers.items():
            path = os.path.join(cls.tmp, f"{name}.pte")
            if name == "sentencepiece":
                model = _chain_model([*ids, 2], bos=1, eos=2, vocab=sp.get_piece_size())
            else:
                model = _chain_model([*ids, BYTE_EOS])
            llm.export_llm(model, 8, max_context_len=32, output=path)
            cls.programs[name] = path

    def _chat(self, program, tokenizer):
        out, err = io.StringIO(), io.StringIO()
        args = ["chat", "--model", program, "--tokenizer", tokenizer, "--prompt", "x"]
        return chat.main(args, io.StringIO(""), out, err), out.getvalue(), err.getvalue()

    def test_characters_split_over_tokens_stream_whole(self):
        for name, (tokenizer, ids) in self.tokenizers.items():
            text = SP_TEXT if name == "sentencepiece" else TEXT
            with self.subTest(tokenizer=name):
                self.assertGreater(len(ids), len("x" + text))  # some characters are several
                self.assertEqual(len(set(ids)), len(ids))  # each token has one successor
                status, out, err = self._chat(self.programs[name], tokenizer)
                self.assertEqual(status, 0, err)
                self.assertEqual(out, text + "\n")

    def test_a_token_the_tokenizer_does_not_have_exits_2_naming_it(self):
        small = _hf_tokenizer(os.path.join(self.tmp, "small.json"))
        status, _, err = self._chat(self.programs["tokenizer.json"], small)
        self.assertEqual(status, 2, err)
        self.assertRegex(
            err,
            r"chat: the model generated token \d+, outside the vocabulary of --tokenizer "
            r".*small\.json \(\d+ tokens\); give the tokenizer the model was trained with",
        )


if __name__ == "__main__":
    absltest.main()
