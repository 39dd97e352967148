"""`//benchmarks:sessions --quick`'s measurements on the toy model: the structure and the byte
counts of the results, never timings (those are judged from a full run)."""

import tempfile

from absl.testing import absltest

from benchmarks import sessions


class SessionsQuickTest(absltest.TestCase):
    def test_quick_run(self):
        with tempfile.TemporaryDirectory() as directory:
            r = sessions.measure(sessions.QUICK, repeats=1, directory=directory)
        q = sessions.QUICK
        self.assertEqual(r["prefix"]["reused_tokens"], q["shared"])
        self.assertEqual(r["fork"]["positions"], q["held"])
        self.assertEqual(r["rewind"]["bytes_copied"], 0)
        dims = q["dims"]
        # The held positions of every K and V cache, and one int64 step counter per layer.
        self.assertEqual(r["held_bytes"], dims.cache_nbytes(q["held"]) + 8 * dims.num_hidden_layers)
        self.assertGreater(r["session_file"]["bytes"], r["held_bytes"])
        self.assertIn("engine portable", r["engine"])
        text = sessions.table(r)
        self.assertIn("reused 16 from the prefix cache", text)
        self.assertIn("0 bytes copied", text)


if __name__ == "__main__":
    absltest.main()
