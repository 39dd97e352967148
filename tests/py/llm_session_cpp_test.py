"""Session files across languages: a conversation saved by ``executorch_trt.llm`` (Python)
continues in C++ (``//examples:llm_session`` on extension/llm's Session) and back, exactly as
one uninterrupted Python session; C++ refuses a damaged file and another program's file,
naming the problem, and leaves the file as it was.

Runs the example program (examples/kv_cache_decode.pte: prefill/decode, no metadata methods,
so ``max_context_len`` 128 is given to both sides) on the portable engine (CPU).
"""

import os
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


@delegate_library.needs_library
class CrossLanguageSessionTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = cls._tmp.name
        cls.pte = _runfile("examples/kv_cache_decode.pte")
        cls.program = llm.load(cls.pte, max_context_len=CAPACITY)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def _cpp(self, session_file: str, prompt, max_new_tokens: int, model=None):
        """One turn of //examples:llm_session; returns (exit code, stdout ids, stderr)."""
        result = subprocess.run(
            [
                _tool(),
                "--model",
                model or self.pte,
                "--max-context-len",
                str(CAPACITY),
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


if __name__ == "__main__":
    absltest.main()
