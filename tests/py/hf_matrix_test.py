"""Coverage matrix: real `transformers` models through the delegate, against eager PyTorch.

One test class per model family (tests/py/hf_models.py: tiny seeded configs of Llama, Qwen3,
Phi-3, Gemma-3 with a sliding window, GPT-2 and Whisper), each exported once (setUpClass)
through transformers' own export wrappers and ``executorch_trt.export(...,
emit_mutable_buffer_names=True)``, then run for prefill plus ``DECODE_STEPS`` greedy decode
steps through ``executorch_trt.runtime`` beside eager PyTorch on a fresh wrapper (same
weights). Checked per family:

* the plan: every method is exactly one ``TensorRTBackend`` delegate call with no operator
  left outside, and no ExecuTorch copy kernel writes a mutable buffer (no state write-back);
* running it: the delegate copies 0 bytes on every call (``runtime.bytes_copied()``), the
  program's greedy token equals eager's at every step, and the logits are within
  1e-4 x max(1, max |eager logits|);
* the reference itself: eager's cached steps equal the plain model's no-cache forward on the
  whole sequence, and dropping the cache moves the logits far beyond the tolerance (so the
  comparison would catch a cache that does not persist); Gemma-3's sliding window changes
  the result (the window is exercised).

Each Bazel target (``hf_matrix_<family>_test``) runs one class by name; run the file without
arguments to run them all. The matrix rows are printed between ``MATRIX_BEGIN`` and
``MATRIX_END`` at the end of the run and written to ``$TEST_UNDECLARED_OUTPUTS_DIR``
(``hf_matrix.md``, ``hf_matrix.json``) when Bazel sets it.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import json
import sys
import time
import warnings

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
import hf_models as hm
from executorch_trt.format.wire import BACKEND_ID

_ROWS = []


def _tolerance(scale: float) -> float:
    return 1e-4 * scale


class _MatrixMixin:
    """The checks for one family (``FAMILY``); a subclass per family below."""

    FAMILY = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.family = hm.FAMILIES[cls.FAMILY]
        start = time.monotonic()
        cls.model = cls.family.model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers/torch deprecation chatter
            cls.et = executorch_trt.export(
                cls.family.export_methods(cls.model), emit_mutable_buffer_names=True
            )
        cls.export_s = time.monotonic() - start
        cls.delegates = {m: hm.delegate_backends(cls.et, m) for m in cls.family.methods}
        cls.write_backs = {m: hm.state_write_backs(cls.et, m) for m in cls.family.methods}
        cls.steps = cls.extra = None
        if delegate_library.available():
            start = time.monotonic()
            cls.steps, cls.extra = hm.greedy_decode(cls.family, cls.model, cls.et.buffer)
            run_s = time.monotonic() - start
            _ROWS.append(
                hm.matrix_row(
                    cls.FAMILY,
                    cls.delegates,
                    {m: sum(n for _, n in wb) for m, wb in cls.write_backs.items()},
                    cls.extra["copied"],
                    cls.steps,
                    cls.export_s,
                    run_s,
                )
            )

    def _need_run(self):
        if self.steps is None:
            delegate_library.require()  # fails under Bazel, skips outside it

    # --- the plan -------------------------------------------------------------------------

    def test_one_tensorrt_delegate_per_method_nothing_outside(self):
        for method in self.family.methods:
            with self.subTest(method=method):
                self.assertEqual(
                    self.delegates[method], [BACKEND_ID], f"{self.FAMILY}.{method}: delegate calls"
                )
                self.assertEqual(
                    hm.operators_outside(self.et, method),
                    [],
                    f"{self.FAMILY}.{method}: operators left outside the delegate",
                )

    def test_no_state_written_back_by_executorch(self):
        for method in self.family.methods:
            with self.subTest(method=method):
                self.assertEqual(
                    self.write_backs[method],
                    [],
                    f"{self.FAMILY}.{method}: ExecuTorch copies these mutable "
                    "buffers back every call (name, bytes)",
                )

    # --- running it -----------------------------------------------------------------------

    def test_delegate_copies_no_bytes(self):
        self._need_run()
        copied = [(m, n) for m, n in self.extra["copied"] if n]
        self.assertEqual(copied, [], f"{self.FAMILY}: calls where the delegate copied bytes")

    def test_greedy_tokens_match_eager(self):
        self._need_run()
        got = [s.program_token for s in self.steps]
        want = [s.token for s in self.steps]
        self.assertEqual(got, want, f"{self.FAMILY}: program vs eager greedy tokens per step")
        self.assertGreaterEqual(len(want), 1 + 6)

    def test_logits_match_eager(self):
        self._need_run()
        for i, s in enumerate(self.steps):
            self.assertLessEqual(
                s.max_abs_diff,
                _tolerance(s.scale),
                f"{self.FAMILY} step {i} ({s.method}): max |dlogit| {s.max_abs_diff:.3e} "
                f"> 1e-4 x {s.scale:.3f}",
            )

    # --- the reference --------------------------------------------------------------------

    def test_eager_steps_equal_full_forward(self):
        """The cached wrapper steps (the reference) equal the plain model without a cache."""
        self._need_run()
        ids = torch.cat([x for _, x, _ in self.extra["inputs"]], dim=1)
        steps = torch.cat(self.extra["eager_logits"], dim=1)
        full = hm.full_forward_logits(self.family, self.model, ids)
        scale = max(1.0, float(full.abs().max()))
        torch.testing.assert_close(
            steps,
            full,
            atol=_tolerance(scale),
            rtol=0,
            msg=f"{self.FAMILY}: eager wrapper vs no-cache forward",
        )

    def test_logits_depend_on_the_cache(self):
        """The first decode step run on an empty cache differs from the real one by far more
        than the tolerance: a program whose cache did not persist would fail the comparison."""
        self._need_run()
        method, ids, pos = self.extra["inputs"][1]
        fresh = self.family.eager(self.model)
        fresh.start(self.family.context())
        without_cache = fresh.step(method, ids, pos)
        with_cache = self.extra["eager_logits"][1]
        diff = float((without_cache - with_cache).abs().max())
        self.assertGreater(diff, 100 * _tolerance(self.steps[1].scale))


class LlamaMatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "llama"


class Qwen3MatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "qwen3"


class Phi3MatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "phi3"


class Gemma3MatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "gemma3"

    def test_sliding_window_is_exercised(self):
        """The sequence runs past the sliding window, and the window changes the logits
        there (same seed, window as long as the cache: different logits past the window)."""
        self._need_run()
        ids = torch.cat([x for _, x, _ in self.extra["inputs"]], dim=1)
        self.assertGreater(ids.shape[1], hm.SLIDING_WINDOW)
        self.assertEqual(self.model.config.layer_types, ["sliding_attention", "full_attention"])
        unwindowed = hm.seeded(lambda: hm._gemma3(sliding_window=hm.MAX_CACHE_LEN))
        windowed = hm.full_forward_logits(self.family, self.model, ids)
        full = hm.full_forward_logits(self.family, unwindowed, ids)
        w = hm.SLIDING_WINDOW
        torch.testing.assert_close(windowed[:, :w], full[:, :w], atol=1e-6, rtol=0)
        self.assertGreater(float((windowed[:, w:] - full[:, w:]).abs().max()), 1e-2)


class Gpt2MatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "gpt2"


class WhisperMatrixTest(_MatrixMixin, absltest.TestCase):
    FAMILY = "whisper"

    def test_encoder_matches_eager(self):
        self._need_run()
        self.assertLessEqual(
            self.extra["encoder_max_abs_diff"], _tolerance(self.extra["encoder_scale"])
        )


class _CacheWriter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 8)
        self.register_buffer("key_cache_0", torch.zeros(1, 2, 8, 4))

    def forward(self, x, pos):  # x [1, 1, 4], pos [1]
        self.key_cache_0.index_copy_(2, pos, self.proj(x).view(1, 2, 1, 4))
        return self.key_cache_0 + 0


class WriteBackCheckTest(absltest.TestCase):
    """The zero-copy plan check can fail: ``kv_cache="copy_back"`` makes ExecuTorch write the
    cache back every call, and ``state_write_backs`` reports it with its size."""

    def test_state_write_backs_sees_copy_back(self):
        with torch.no_grad():
            ep = torch.export.export(_CacheWriter(), (torch.randn(1, 1, 4), torch.tensor([3])))
        for kv_cache, want in [("inplace", []), ("copy_back", [("key_cache_0", 2 * 8 * 4 * 4)])]:
            with self.subTest(kv_cache=kv_cache):
                et = executorch_trt.export(ep, kv_cache=kv_cache, emit_mutable_buffer_names=True)
                self.assertEqual(hm.state_write_backs(et, "forward"), want)


def _report():
    """Prints the matrix rows of this run in a delimited block, and writes them to
    $TEST_UNDECLARED_OUTPUTS_DIR when Bazel sets it."""
    if not _ROWS:
        return
    lines = [hm.MATRIX_BEGIN, hm.MATRIX_HEADER, hm.MATRIX_RULE]
    lines += [r["markdown"] for r in _ROWS]
    lines.append(hm.MATRIX_END)
    text = "\n".join(lines) + "\n"
    sys.stdout.write("\n" + text)
    sys.stdout.flush()
    out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if out:
        with open(os.path.join(out, "hf_matrix.md"), "w") as f:
            f.write(text)
        with open(os.path.join(out, "hf_matrix.json"), "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "markdown"} for r in _ROWS], f, indent=1)


def tearDownModule():
    _report()


if __name__ == "__main__":
    absltest.main()
