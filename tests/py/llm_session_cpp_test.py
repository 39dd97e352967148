"""Session files across languages: a conversation saved by ``executorch_trt.llm`` (Python)
continues in C++ (``//examples:llm_session`` on extension/llm's Session) and back, exactly as
one uninterrupted Python session; C++ refuses a damaged file and another program's file,
naming the problem, and leaves the file as it was. Files whose header lies under a valid
checksum (ids outside the vocabulary, logits of another width, a partial snapshot, data out of
bounds) are refused by both languages with the same reason.

Runs the example program (examples/kv_cache_decode.pte: prefill/decode, no metadata methods,
so ``max_context_len`` 128 is given to both sides) on the portable engine (CPU).
"""

import hashlib
import json
import os
import struct
import subprocess
import tempfile

import torch
from absl.testing import absltest
from runfiles import Runfiles

import delegate_library
from executorch_trt import llm

CAPACITY = 128
PROMPT = [37, 235, 396, 12]
SECOND_TURN = [5, 77]


def _runfile(path: str) -> str:
    return Runfiles.Create().Rlocation("executorch_trt/" + path)


def _tool() -> str:
    return _runfile("examples/llm_session")


def _rewrite(path: str, edit) -> None:
    """Applies ``edit`` to the JSON header of the session file at ``path`` (in place), then
    writes the header's size and the BLAKE2b-256 trailer again: a file whose checksum holds
    but whose header says what ``edit`` made it say (the layout:
    py/executorch_trt/llm/session_file.py)."""
    with open(path, "rb") as f:
        data = f.read()
    magic_version, header_size = data[:16], struct.unpack_from("<Q", data, 16)[0]
    header = json.loads(data[24 : 24 + header_size])
    body = data[24 + header_size : -32]
    edit(header)
    text = json.dumps(header).encode()
    out = magic_version + struct.pack("<Q", len(text)) + text + body
    with open(path, "wb") as f:
        f.write(out + hashlib.blake2b(out, digest_size=32).digest())


@delegate_library.needs_library
class CrossLanguageSessionTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = cls.enterClassContext(tempfile.TemporaryDirectory())
        cls.pte = _runfile("examples/kv_cache_decode.pte")
        cls.program = llm.load(cls.pte, max_context_len=CAPACITY)

    def _cpp(self, session_file: str, prompt, max_new_tokens: int, model=None):
        """One turn of //examples:llm_session; returns (exit code, stdout ids, stderr). The
        example program needs --max-context-len; ``model``, one with metadata, does not."""
        result = subprocess.run(
            [
                _tool(),
                "--model",
                model or self.pte,
                *([] if model else ["--max-context-len", str(CAPACITY)]),
                "--prompt",
                ",".join(str(t) for t in prompt),
                "--max-new-tokens",
                str(max_new_tokens),
                "--session",
                session_file,
            ],
            capture_output=True,
            text=True,
            env=delegate_library.subprocess_env(),
            timeout=300,
        )
        ids = [int(t) for t in result.stdout.replace("\n", "").split(",") if t]
        return result.returncode, ids, result.stderr

    def _state(self, session):
        return {name: tensor.clone() for name, tensor in session.state.items()}

    def test_python_to_cpp_to_python_continues_as_uninterrupted(self):
        # The reference: one Python session holding both turns and one more decode.
        whole = self.program.new_session()
        whole.prefill(PROMPT)
        first = list(whole.generate(max_new_tokens=5))
        whole.prefill(SECOND_TURN)
        second = list(whole.generate(max_new_tokens=6))

        path = os.path.join(self.tmp, "py_cpp_py.etrts")
        s = self.program.new_session()
        s.prefill(PROMPT)
        self.assertEqual(list(s.generate(max_new_tokens=5)), first)
        s.save(path)

        code, ids, err = self._cpp(path, SECOND_TURN, 6)
        self.assertEqual(code, 0, err)
        self.assertIn(f"resumed {len(PROMPT) + 5} tokens", err)
        self.assertIn("engine portable", err)
        self.assertEqual(ids, second, "C++ continuing a Python session")

        back = self.program.load_session(path)
        self.assertEqual(back.tokens, whole.tokens)
        want_state = self._state(whole)
        for name, got in self._state(back).items():
            torch.testing.assert_close(got, want_state[name], rtol=0, atol=1e-5, msg=name)
        torch.testing.assert_close(back.decode(9), whole.decode(9), rtol=0, atol=1e-4)

    def test_cpp_session_continues_in_python(self):
        path = os.path.join(self.tmp, "cpp_py.etrts")
        code, ids, err = self._cpp(path, PROMPT, 4)
        self.assertEqual(code, 0, err)
        whole = self.program.new_session()
        whole.prefill(PROMPT)
        self.assertEqual(list(whole.generate(max_new_tokens=4)), ids)
        loaded = self.program.load_session(path)
        self.assertEqual(loaded.tokens, whole.tokens)
        loaded.prefill(SECOND_TURN)
        whole.prefill(SECOND_TURN)
        self.assertEqual(list(loaded.generate(5)), list(whole.generate(5)))

    def test_cpp_says_when_a_full_cache_cuts_the_turn_short(self):
        path = os.path.join(self.tmp, "full.etrts")
        code, ids, err = self._cpp(path, [5] * (CAPACITY - 3), 10)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(ids), 3)
        self.assertIn("stopped early: the cache is full", err)

    def test_cpp_refuses_a_damaged_file_and_leaves_it(self):
        path = os.path.join(self.tmp, "damaged.etrts")
        s = self.program.new_session()
        s.prefill(PROMPT)
        s.save(path)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x40]))
        with open(path, "rb") as f:
            damaged = f.read()
        code, ids, err = self._cpp(path, SECOND_TURN, 2)
        self.assertEqual(code, 2, err)
        self.assertEqual(ids, [])
        self.assertIn("corrupted", err)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), damaged, "the refused file was changed")

        with open(path, "wb") as f:
            f.write(damaged[:100])
        code, _, err = self._cpp(path, SECOND_TURN, 2)
        self.assertEqual(code, 2, err)
        self.assertIn("truncated", err)

    def test_cpp_refuses_another_programs_session(self):
        counting = llm.load(_runfile("tests/cpp/testdata/counting_llm.pte"))
        path = os.path.join(self.tmp, "other.etrts")
        s = counting.new_session()
        s.prefill([1, 2, 3])
        s.save(path)
        code, ids, err = self._cpp(path, SECOND_TURN, 2)
        self.assertEqual(code, 2, err)
        self.assertEqual(ids, [])
        self.assertIn("saved from another program", err)
        self.assertEqual(counting.load_session(path).tokens, [1, 2, 3])

    def _both_refuse(self, program, path: str, expect: str, model=None) -> None:
        """Python's load_session and the C++ tool refuse ``path``, saying ``expect``; the
        file is left as it was."""
        with open(path, "rb") as f:
            before = f.read()
        with self.assertRaisesRegex(ValueError, expect):
            program.load_session(path)
        code, ids, err = self._cpp(path, SECOND_TURN, 2, model=model)
        self.assertEqual(code, 2, err)
        self.assertEqual(ids, [])
        self.assertRegex(err, expect)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before, "the refused file was changed")

    def test_a_header_that_lies_under_a_valid_checksum_is_refused_by_both(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        s.decode(3)
        path = os.path.join(self.tmp, "lying.etrts")

        def entry(header, role):
            return next(t for t in header["tensors"] if t["role"] == role)

        def shorter_logits(header):
            logits = entry(header, "logits")
            logits["shape"] = [logits["shape"][0] - 1]
            logits["nbytes"] -= 4

        def out_of_bounds(header):
            entry(header, "buffer")["offset"] = header["data_size"]

        def huge_shape(header):
            entry(header, "buffer")["shape"] = [2**40, 2**40, 2**40]

        cases = [
            (lambda h: h["tokens"].__setitem__(2, 10**6), "token 2 is 1000000, outside the vocab"),
            (lambda h: h["tokens"].__setitem__(0, -1), "token 0 is -1, outside the vocabulary"),
            (shorter_logits, "its logits"),
            (out_of_bounds, "does not fit its extent"),
            (huge_shape, "does not fit its extent"),
        ]
        for edit, expect in cases:
            with self.subTest(expect=expect):
                s.save(path)
                _rewrite(path, edit)
                self._both_refuse(self.program, path, expect)

    def test_malformed_headers_are_refused_by_both(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        path = os.path.join(self.tmp, "malformed.etrts")

        def huge_zero_shape(header):
            next(t for t in header["tensors"] if t["role"] == "buffer")["shape"] = [2**62, 2**62, 0]
            next(t for t in header["tensors"] if t["role"] == "buffer")["nbytes"] = 0

        cases = [
            (lambda h: h.__setitem__("tensors", 5), "header cannot be read"),
            (lambda h: h.__setitem__("counters", 5), "header cannot be read"),
            (lambda h: h.__setitem__("data_size", "x"), "header cannot be read"),
            (lambda h: h["tokens"].__setitem__(0, True), "token ids are not a list"),
            (lambda h: h["tokens"].extend([1] * CAPACITY), "token ids are not a list"),
            (huge_zero_shape, "torch cannot hold|is .*tokens need"),
        ]
        for edit, expect in cases:
            with self.subTest(expect=expect):
                s.save(path)
                _rewrite(path, edit)
                self._both_refuse(self.program, path, expect)
        s.save(path)
        with open(path, "r+b") as f:  # a header size past the end of the file
            f.seek(16)
            f.write(struct.pack("<Q", 2**63))
            f.seek(0)
            body = f.read()[:-32]
            f.seek(0)
            f.write(body + hashlib.blake2b(body, digest_size=32).digest())
        self._both_refuse(self.program, path, "its header says 9223372036854775808 bytes")

    def test_a_counter_that_does_not_count_is_refused_by_both(self):
        pte = _runfile("tests/cpp/testdata/counting_llm.pte")
        counting = llm.load(pte)
        s = counting.new_session()
        s.prefill([1, 2, 3])
        path = os.path.join(self.tmp, "counter_lie.etrts")
        s.save(path)
        _rewrite(path, lambda h: h["counters"].append("total"))
        self._both_refuse(
            counting, path, "'total' is listed as a token counter but does not hold", pte
        )

    def test_a_partial_snapshot_is_refused_by_both(self):
        pte = _runfile("tests/cpp/testdata/counting_llm.pte")
        counting = llm.load(pte)
        s = counting.new_session()
        s.prefill([1, 2, 3])
        s.decode(4)
        path = os.path.join(self.tmp, "partial_snapshot.etrts")
        s.save(path)

        def drop_one_snapshot_value(header):
            snapshots = [t for t in header["tensors"] if t["role"] == "snapshot"]
            self.assertTrue(snapshots, "the counting program's session saves snapshots")
            header["tensors"].remove(next(t for t in snapshots if t["name"] == "total"))

        _rewrite(path, drop_one_snapshot_value)
        self._both_refuse(counting, path, "the snapshot at [0-9]+ has no value of buffer", pte)


if __name__ == "__main__":
    absltest.main()
