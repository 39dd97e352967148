"""Conversations as objects (``executorch_trt.llm.load`` / ``Session``) against eager PyTorch.

Programs: a tiny Llama exported by ``export_llm`` (one dynamic ``forward``, metadata methods),
the same as ``prefill``/``decode``, a Gemma-3 with a sliding window (its ring-buffer caches are
not positional: rewind restores them from snapshots and runs tokens again), and the example's
``prefill``/``decode`` program without metadata (``max_context_len`` given). The reference is
the plain model's forward over the whole sequence, without a cache.
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import ClassVar
from unittest import mock

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import torch
from absl.testing import absltest
from runfiles import Runfiles

import delegate_library
import hf_models as H
import llm_test_models as M
from executorch_trt import llm, runtime
from executorch_trt.llm import session as session_module
from executorch_trt.llm import session_file
from executorch_trt.llm.state_layout import StateLayout, StateProbe, written_dim
from executorch_trt.runtime.tensors import TensorSpec

MAX_SEQ_LEN = 16
MAX_CONTEXT_LEN = 64
PROMPT = [M.BOS_ID, 3, 1, 20, 7, 11, 4, 0, 9, 13]


def _eager_logits(model, ids):
    """The plain model's logits of the last of ``ids`` (no cache)."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]


def _assert_close(test, got, want, what):
    scale = max(1.0, float(want.abs().max()))
    diff = float((got - want).abs().max())
    test.assertLessEqual(diff, 1e-4 * scale, f"{what}: max |dlogit| {diff}")


def _assert_same_state(test, a, b, what):
    """``a`` and ``b`` hold the same tokens and the same state: the held entries of the caches
    to float tolerance, the entries past them and every other buffer (e.g. the step
    counters) exactly."""
    test.assertEqual(a.tokens, b.tokens, what)
    layout = a.model.layout
    for name, tensor in a.state.items():
        mine = layout.held(name, tensor, a.position)
        theirs = layout.held(name, b.state[name], b.position)
        if tensor.dtype.is_floating_point:
            test.assertTrue(torch.allclose(mine, theirs, atol=1e-5), f"{what}: {name}")
        else:
            test.assertTrue(torch.equal(mine, theirs), f"{what}: {name} {mine} != {theirs}")
        if name in layout.positional:
            end = layout.capacity
            test.assertTrue(
                torch.equal(
                    layout.dropped(name, tensor, a.position, end),
                    layout.dropped(name, b.state[name], b.position, end),
                ),
                f"{what}: {name} past the held tokens",
            )


def _load_decoder(module, capacity):
    """``(program, eager)``: ``module`` (a one-layer decoder of llm_test_models) exported with
    ``get_max_context_len=capacity`` and loaded, and ``eager(ids)``, its last token's logits
    for ``ids`` run from the module's initial state."""
    module = module.eval()
    reference = copy.deepcopy(module)
    program = llm.load(M.export_counting(False, module, get_max_context_len=capacity).buffer)

    def eager(ids):
        with torch.no_grad():
            model = copy.deepcopy(reference)
            return model(torch.tensor([ids]), torch.arange(len(ids)))[0, -1]

    return program, eager


def _export(model, path, **kwargs):
    program = llm.export_llm(model, MAX_SEQ_LEN, max_context_len=MAX_CONTEXT_LEN, **kwargs)
    with open(path, "wb") as f:
        f.write(program.buffer)
    return path


class _Programs:
    """Exported once per process (tests share them)."""

    _dir: ClassVar[str | None] = None
    _cache: ClassVar[dict[str, tuple]] = {}

    @classmethod
    def get(cls, name):
        if name not in cls._cache:
            if cls._dir is None:
                cls._dir = tempfile.mkdtemp()
            path = os.path.join(cls._dir, f"{name}.pte")
            if name == "llama":
                model = M.tiny_llama()
                _export(model, path)
            elif name == "llama_prefill_decode":
                model = M.tiny_llama()
                _export(model, path, prefill_decode=True)
            elif name == "gemma3":
                model = H.FAMILIES["gemma3"].model()
                _export(model, path)
            else:
                raise KeyError(name)
            cls._cache[name] = (model, path)
        return cls._cache[name]


class _LlamaProgramTest(absltest.TestCase):
    """The eager Llama (`model`), its program's path and the loaded program, once per class."""

    @classmethod
    def setUpClass(cls):
        cls.model, cls.path = _Programs.get("llama")
        cls.program = llm.load(cls.path)


@delegate_library.needs_library
class SessionTest(_LlamaProgramTest):
    def test_the_program_is_read_from_its_metadata(self):
        p = self.program
        self.assertEqual((p.prefill_method, p.decode_method), ("forward", "forward"))
        self.assertEqual(
            (p.max_seq_len, p.max_context_len, p.vocab_size),
            (MAX_SEQ_LEN, MAX_CONTEXT_LEN, M.VOCAB),
        )
        self.assertEqual((p.bos_id, p.eos_ids), (M.BOS_ID, (M.EOS_ID,)))
        self.assertEqual(
            sorted(p.layout.positional),
            sorted(n for n in p.program.buffer_names if "cache" in n and "cumulative" not in n),
        )
        self.assertTrue(all("cumulative_length" in n for n in p.layout.other))

    def test_prefill_and_decode_match_eager(self):
        s = self.program.new_session()
        # Longer than max_seq_len: two chunks.
        prompt = [*PROMPT, 5, 6, 7, 8, 9, 10, 12]
        _assert_close(self, s.prefill(prompt), _eager_logits(self.model, prompt), "prefill")
        self.assertEqual((s.position, s.tokens), (len(prompt), prompt))
        _assert_close(self, s.decode(17), _eager_logits(self.model, [*prompt, 17]), "decode")

    def test_greedy_generate_matches_eager_greedy(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        got = list(s.generate(max_new_tokens=16, stop_tokens=self.program.eos_ids))
        want = M.greedy_tokens(self.model, PROMPT, 16, eos_ids=self.program.eos_ids)
        self.assertEqual(got, want)
        self.assertEqual(s.tokens, PROMPT + got)

    def test_each_step_copies_no_state(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        before = runtime.bytes_copied()
        pointers = {n: t.data_ptr() for n, t in s.state.items()}
        list(s.generate(max_new_tokens=4))
        self.assertEqual(runtime.bytes_copied() - before, 0)
        self.assertEqual({n: t.data_ptr() for n, t in s.state.items()}, pointers)

    def test_rewind_then_continue_equals_a_session_that_never_saw_the_dropped_tokens(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        list(s.generate(max_new_tokens=5))
        for n in (len(PROMPT) + 2, 4, 0):  # a generated position, inside the prompt, empty
            s.rewind(n)
            self.assertEqual(s.position, n)
            kept = s.tokens
            new = [21, 8, 30]
            got = s.prefill(new)
            fresh = self.program.new_session()
            want = fresh.prefill(kept + new)
            _assert_close(self, got, want, f"rewind({n}) vs fresh")
            _assert_close(self, got, _eager_logits(self.model, kept + new), f"rewind({n})")
            _assert_same_state(self, s, fresh, f"rewind({n}) vs fresh")
            self.assertEqual(list(s.generate(6)), list(fresh.generate(6)))

    def test_generate_after_rewind_recomputes_the_last_logits(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        s.rewind(6)
        got = list(s.generate(4))
        self.assertEqual(got, M.greedy_tokens(self.model, PROMPT[:6], 4))

    def test_fork_and_parent_diverge_independently(self):
        parent = self.program.new_session()
        parent.prefill(PROMPT)
        child = parent.fork()
        self.assertEqual(child.tokens, parent.tokens)
        for name, t in child.state.items():
            self.assertNotEqual(t.data_ptr(), parent.state[name].data_ptr(), name)
        a = parent.decode(40)
        b = child.decode(41)
        _assert_close(self, a, _eager_logits(self.model, [*PROMPT, 40]), "parent")
        _assert_close(self, b, _eager_logits(self.model, [*PROMPT, 41]), "child")
        parent.rewind(3)
        _assert_close(
            self,
            child.decode(42),
            _eager_logits(self.model, [*PROMPT, 41, 42]),
            "child after the parent rewound",
        )

    def test_sampling_with_a_seed_is_reproducible(self):
        runs = []
        for seed in (7, 7, 8):
            s = self.program.new_session()
            s.prefill(PROMPT)
            runs.append(list(s.generate(12, temperature=1.5, top_k=50, top_p=0.95, seed=seed)))
        self.assertEqual(runs[0], runs[1])
        self.assertNotEqual(runs[0], runs[2])
        self.assertTrue(all(0 <= t < M.VOCAB for t in runs[0]))

    def test_two_sessions_in_two_threads_equal_each_alone(self):
        prompts = [PROMPT, [M.BOS_ID, 30, 31, 2, 2, 5]]
        alone = []
        for prompt in prompts:
            s = self.program.new_session()
            s.prefill(prompt)
            alone.append(list(s.generate(40)))
        results = [None, None]
        errors = []

        def run(k):
            try:
                s = self.program.new_session()
                s.prefill(prompts[k])
                results[k] = list(s.generate(40))
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, alone)

    def test_bad_use_raises_clearly(self):
        s = self.program.new_session()
        with self.assertRaisesRegex(ValueError, "holds no tokens; prefill a prompt first"):
            s.decode(1)
        with self.assertRaisesRegex(ValueError, "no tokens given"):
            s.prefill([])
        with self.assertRaisesRegex(
            ValueError,
            rf"token 1 is {M.VOCAB}, outside the "
            rf"vocabulary \[0, {M.VOCAB}\)",
        ):
            s.prefill([1, M.VOCAB])
        with self.assertRaisesRegex(TypeError, "token 0 is 1.5, not an int"):
            s.prefill([1.5])
        with self.assertRaisesRegex(
            ValueError,
            rf"{MAX_CONTEXT_LEN + 1} tokens do not fit: "
            rf"the session holds 0 of {MAX_CONTEXT_LEN} "
            rf"positions .*so {MAX_CONTEXT_LEN} more fit",
        ):
            s.prefill([1] * (MAX_CONTEXT_LEN + 1))
        self.assertEqual(s.position, 0)
        s.prefill([1, 2, 3])
        with self.assertRaisesRegex(ValueError, r"rewind\(4\): the session holds 3 tokens"):
            s.rewind(4)
        with self.assertRaisesRegex(ValueError, r"rewind\(-1\)"):
            s.rewind(-1)
        with self.assertRaisesRegex(ValueError, "temperature must be >= 0"):
            next(s.generate(2, temperature=-1.0))
        with self.assertRaisesRegex(ValueError, r"top_p must be in \(0, 1\]"):
            next(s.generate(2, top_p=0.0))
        with self.assertRaisesRegex(ValueError, r"seed must be in \[0, 2\*\*63\)"):
            next(s.generate(2, temperature=1.0, seed=2**64))
        with self.assertRaisesRegex(TypeError, "not text/bytes"):
            s.prefill(b"\x01\x02")
        s.close()
        with self.assertRaisesRegex(RuntimeError, "session is closed"):
            s.decode(1)

    def test_a_tiny_temperature_is_greedy_and_no_stop_tokens_is_none(self):
        greedy, tiny = self.program.new_session(), self.program.new_session()
        greedy.prefill(PROMPT)
        tiny.prefill(PROMPT)
        want = list(greedy.generate(8))
        self.assertEqual(list(tiny.generate(8, temperature=1e-45, seed=1, stop_tokens=None)), want)

    def test_generate_stops_when_the_cache_is_full(self):
        s = self.program.new_session()
        s.prefill([1] * (MAX_CONTEXT_LEN - 3))
        self.assertEqual(len(list(s.generate(10))), 3)
        self.assertEqual(s.position, MAX_CONTEXT_LEN)
        with self.assertRaisesRegex(ValueError, "so 0 more fit"):
            s.decode(1)


@delegate_library.needs_library
class SavedSessionTest(_LlamaProgramTest):
    def _saved(self):
        s = self.program.new_session()
        s.prefill(PROMPT)
        first = list(s.generate(4))
        path = os.path.join(self.create_tempdir().full_path, "chat.session")
        s.save(path)
        return s, first, path

    def test_save_then_load_in_a_new_process_continues_as_uninterrupted(self):
        s, first, path = self._saved()
        uninterrupted = list(s.generate(10))
        script = (
            "import json, sys\n"
            "from executorch_trt import llm\n"
            "program = llm.load(sys.argv[1])\n"
            "s = program.load_session(sys.argv[2])\n"
            "print(json.dumps({'tokens': s.tokens, 'next': list(s.generate(10))}))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, self.path, path],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertEqual(result["tokens"], PROMPT + first)
        self.assertEqual(result["next"], uninterrupted)

    def test_a_loaded_session_has_the_same_state_bit_for_bit(self):
        s, _, path = self._saved()
        t = self.program.load_session(path)
        self.assertEqual(t.tokens, s.tokens)
        for name, tensor in s.state.items():
            held_s = self.program.layout.held(name, tensor, s.position)
            held_t = self.program.layout.held(name, t.state[name], t.position)
            self.assertTrue(torch.equal(held_s, held_t), name)

    def test_damaged_and_foreign_files_are_refused_and_nothing_changes(self):
        _s, _, path = self._saved()
        live = self.program.new_session()
        live.prefill([1, 2, 3])
        before = {n: t.clone() for n, t in live.state.items()}
        with open(path, "rb") as f:
            data = f.read()
        directory = self.create_tempdir().full_path

        def write(name, content):
            p = os.path.join(directory, name)
            with open(p, "wb") as f:
                f.write(content)
            return p

        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x40
        newer = bytearray(data)
        newer[8:12] = (session_file.FORMAT_VERSION + 1).to_bytes(4, "little")
        cases = {
            "truncated": (write("truncated", data[:-100]), "truncated or corrupted"),
            "corrupted": (write("corrupted", bytes(flipped)), "truncated or corrupted"),
            "tiny": (write("tiny", data[:10]), "truncated: 10 bytes"),
            "not a session": (write("other", b"x" * 100), "not a session file"),
            "newer": (write("newer", bytes(newer)), "newer executorch_trt .*version 2"),
        }
        for what, (p, message) in cases.items():
            with self.subTest(what), self.assertRaisesRegex(ValueError, message):
                self.program.load_session(p)
        _, other_path = _Programs.get("llama_prefill_decode")
        other = llm.load(other_path)
        with self.assertRaisesRegex(
            ValueError,
            r"saved from another program: .*the \.pte "
            r"differs",
        ):
            other.load_session(path)
        for n, t in live.state.items():
            self.assertTrue(torch.equal(t, before[n]), n)
        _assert_close(
            self,
            live.decode(4),
            _eager_logits(self.model, [1, 2, 3, 4]),
            "a live session after the refusals",
        )

    def test_a_failed_save_leaves_the_previous_file(self):
        s, _, path = self._saved()
        saved_tokens = s.tokens
        s.decode(3)
        real_replace = os.replace

        def failing_replace(src, dst):
            raise OSError("disk full (simulated)")

        os.replace = failing_replace
        try:
            with self.assertRaisesRegex(OSError, "simulated"):
                s.save(path)
        finally:
            os.replace = real_replace
        self.assertEqual(sorted(os.listdir(os.path.dirname(path))), ["chat.session"])
        self.assertEqual(self.program.load_session(path).tokens, saved_tokens)
        s.save(path)
        self.assertEqual(self.program.load_session(path).tokens, s.tokens)

    def test_save_refuses_a_path_that_is_not_a_file_and_names_the_target(self):
        s, _, path = self._saved()
        directory = os.path.dirname(path)
        with self.assertRaisesRegex(ValueError, "exists and is not a regular file"):
            s.save(directory)
        with self.assertRaisesRegex(ValueError, "not a regular file"):
            self.program.load_session(directory)
        fifo = os.path.join(directory, "fifo")
        os.mkfifo(fifo)
        with self.assertRaisesRegex(ValueError, "not a regular file"):
            self.program.load_session(fifo)  # reading it would block
        os.unlink(fifo)
        missing = os.path.join(directory, "no such directory", "chat.session")
        with self.assertRaisesRegex(OSError, "save: cannot write .*no such directory"):
            s.save(missing)
        self.assertEqual(sorted(os.listdir(directory)), ["chat.session"])


@delegate_library.needs_library
class PrefixCacheTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model, cls.path = _Programs.get("llama")

    def test_a_new_sessions_prefill_reuses_the_longest_cached_prefix(self):
        program = llm.load(self.path)
        cache = program.prefix_cache(max_bytes=1 << 24)
        shared = [*PROMPT, 5, 6, 7, 8]
        first = program.new_session()
        first.prefill(shared)
        self.assertEqual(first.reused_tokens, 0)
        cases = [
            ([*shared, 9, 10], len(shared)),  # the whole entry, then two tokens
            (shared, len(shared)),  # equal: nothing runs
            ([*shared[:6], 30], 6),  # part of an entry (counters only)
            (shared[:3], 2),  # shorter than the entry: one token runs
            ([40, 41], 0),  # nothing shared
        ]
        for prompt, reused in cases:
            with self.subTest(prompt=prompt):
                s = program.new_session()
                got = s.prefill(prompt)
                self.assertEqual(s.reused_tokens, reused)
                _assert_close(self, got, _eager_logits(self.model, prompt), "logits")
                plain = llm.load(self.path).new_session()
                want = plain.prefill(prompt)
                self.assertTrue(torch.allclose(got, want, atol=1e-5), "vs no cache")
                self.assertEqual(list(s.generate(5)), list(plain.generate(5)))
        self.assertGreater(cache.hits, 0)

    def test_least_recently_used_entries_are_evicted(self):
        program = llm.load(self.path)
        probe = program.prefix_cache(max_bytes=1 << 24)
        program.new_session().prefill(PROMPT)
        one_entry = probe.bytes
        self.assertGreater(one_entry, program.layout.held_bytes(len(PROMPT)))
        cache = program.prefix_cache(max_bytes=int(one_entry * 2.5))
        for first in (50, 51, 52):
            program.new_session().prefill([first, *PROMPT[1:]])
        self.assertEqual((cache.entries, cache.bytes), (2, 2 * one_entry))
        s = program.new_session()
        s.prefill([50, *PROMPT[1:]])
        self.assertEqual(s.reused_tokens, 0)  # the least recently used: evicted
        s = program.new_session()
        s.prefill([52, *PROMPT[1:]])
        self.assertEqual(s.reused_tokens, len(PROMPT))
        too_small = program.prefix_cache(max_bytes=one_entry - 1)
        program.new_session().prefill(PROMPT)
        self.assertEqual(too_small.entries, 0)


class StateProbeTest(absltest.TestCase):
    """``state_layout.StateProbe`` and ``StateLayout.of`` on buffers written in different ways
    (the C++ twin: ``StateProbeTest`` and ``StateLayoutTest`` in tests/cpp/llm_session_test)."""

    def test_positional_is_written_once_at_the_tokens_position_a_counter_counts_tokens(self):
        capacity = 8
        shapes = {
            "cache": (torch.float32, [1, capacity, 2]),
            "counted_cache": (torch.float32, [1, capacity, 2]),  # written at `count`
            "transposed": (torch.float32, [1, capacity, capacity]),
            "table": (torch.float32, [capacity]),  # indexed by token id
            "runs": (torch.float32, [capacity]),  # += 1 at the position
            "ring": (torch.float32, [capacity, 2]),  # at capacity - 1 - p
            "count": (torch.int64, []),
            "sum": (torch.int64, []),  # += token id
        }
        specs = {n: TensorSpec(dtype, shape) for n, (dtype, shape) in shapes.items()}
        state = {n: torch.zeros(shape, dtype=dtype) for n, (dtype, shape) in shapes.items()}

        def run(token, p):
            value = float(token + 1)
            at = int(state["count"])
            state["cache"][0, p] = value
            state["counted_cache"][0, at] = value
            state["ring"][capacity - 1 - p] = value
            state["transposed"][0, :, p] = value + torch.arange(capacity)
            state["table"][token] = 1.0
            state["runs"][p] += 1.0
            state["count"] += 1
            state["sum"] += token

        probe = StateProbe(specs, capacity)
        sets = StateProbe.token_sets(48)
        self.assertEqual(sets, [(2, 3, 3), (24, 25, 25), (46, 47, 47)])
        for token, position in zip(sets[0], StateProbe.POSITIONS):
            probe.prepare(state)
            run(token, position)
            probe.observe(state)
        self.assertEqual(probe.positional(), {"cache": 1, "counted_cache": 1, "transposed": 2})
        self.assertEqual(probe.counters(), {"count"})
        # Before the repeated token the counter was put back to one token, so it counts two.
        self.assertEqual(int(state["count"]), 2)
        self.assertEqual(probe.silent(), set())
        self.assertEqual(StateProbe.token_sets(3), [(2, 2, 2)])
        self.assertEqual(StateProbe.token_sets(4), [(2, 3, 3)])

    def test_the_layout_takes_the_roles_where_they_can_hold(self):
        specs = {
            "b0": TensorSpec(torch.float32, [1, 2, 8, 8]),
            "b1": TensorSpec(torch.float32, [1, 8, 2, 8]),
            "b2": TensorSpec(torch.int64, []),
            "b3": TensorSpec(torch.float32, []),
            "b4": TensorSpec(torch.int32, [1]),
        }
        layout = StateLayout.of(specs, 8, {"b0": 3, "b1": 2}, {"b0", "b2", "b3", "b4"})
        self.assertEqual(layout.positional, {"b0": 3})
        self.assertEqual(layout.other, ("b1", "b2", "b3", "b4"))
        self.assertEqual(layout.counters, frozenset({"b2", "b4"}))


class WrittenDimTest(absltest.TestCase):
    """``state_layout.written_dim``: the dimension along which one token wrote one entry."""

    def test_the_dimension_with_one_changed_index(self):
        before = torch.zeros(1, 4, 4)
        column, row, one, negative_zero = (before.clone() for _ in range(4))
        column[0, :, 0] = torch.arange(1.0, 5.0)  # index 0 along the last dimension
        row[0, 0, :] = torch.arange(1.0, 5.0)  # index 0 along the middle one
        one[0, 0, 0] = 1.0  # a single entry says nothing
        negative_zero[0, 0, 0] = negative_zero[0, 0, 3] = -0.0  # bits differ from 0.0
        self.assertEqual(written_dim(before, column, [1, 2]), 2)
        self.assertEqual(written_dim(before, row, [1, 2]), 1)
        self.assertIsNone(written_dim(before, one, [1, 2]))
        self.assertIsNone(written_dim(before, before.clone(), [1, 2]))
        self.assertEqual(written_dim(before, negative_zero, [1, 2]), 1)

    def test_only_at_the_tokens_position(self):
        # A token at position 0 written at index 3 (a ring buffer filled from its end, a sink
        # slot first): keeping the first n entries would keep the wrong ones.
        before = torch.zeros(1, 4, 4)
        after = before.clone()
        after[0, :, 3] = torch.arange(1.0, 5.0)
        self.assertIsNone(written_dim(before, after, [1, 2]))
        self.assertEqual(written_dim(before, after, [1, 2], position=3), 2)

    def test_any_dtype_and_layout(self):
        before = torch.zeros(4, 4, dtype=torch.complex128).t()
        after = before.clone()
        after[0, :] = 1 + 2j
        self.assertEqual(written_dim(before, after, [0, 1]), 0)


@delegate_library.needs_library
class OtherProgramsTest(absltest.TestCase):
    def test_prefill_decode_program(self):
        model, path = _Programs.get("llama_prefill_decode")
        program = llm.load(path)
        self.assertEqual((program.prefill_method, program.decode_method), ("prefill", "decode"))
        s = program.new_session()
        s.prefill(PROMPT)
        self.assertEqual(list(s.generate(8)), M.greedy_tokens(model, PROMPT, 8))

    def test_a_head_dimension_as_long_as_the_cache(self):
        # Caches [1, 2, 8, 8]: head_dim 8 and 8 positions. A fork copies the held positions
        # along the position dimension only, so a wrong one shows in the fork's logits.
        model = M.tiny_llama()
        path = os.path.join(self.create_tempdir().full_path, "head_dim_8.pte")
        with open(path, "wb") as f:
            f.write(llm.export_llm(model, 4, max_context_len=8).buffer)
        program = llm.load(path)
        self.assertEqual(set(program.layout.positional.values()), {2})
        prompt = PROMPT[:4]
        s = program.new_session()
        _assert_close(self, s.prefill(prompt), _eager_logits(model, prompt), "prefill")
        _assert_close(self, s.decode(11), _eager_logits(model, [*prompt, 11]), "decode")
        s.rewind(3)
        fork = s.fork()
        s.decode(5)  # the parent overwrites position 3 after the fork
        _assert_close(
            self, fork.decode(12), _eager_logits(model, [*prompt[:3], 12]), "rewind(3), fork"
        )

    def test_as_many_kv_heads_as_positions(self):
        # Caches [1, 4, 4, 8]: 4 KV heads and 4 positions, so two dimensions have the capacity
        # and neither is the last. The probe tokens find the positions (dimension 2).
        model = M.llama(kv_heads=4)
        program = llm.load(llm.export_llm(model, 4, max_context_len=4).buffer)
        caches = [n for n in program.program.buffer_names if "cache" in n and "cumulative" not in n]
        self.assertEqual(program.layout.positional, dict.fromkeys(caches, 2))
        s = program.new_session()
        _assert_close(self, s.prefill([5, 9, 13]), _eager_logits(model, [5, 9, 13]), "prefill")
        s.rewind(2)
        fork = s.fork()
        s.decode(7)  # the parent overwrites position 2 after the fork
        _assert_close(self, fork.decode(11), _eager_logits(model, [5, 9, 11]), "rewind(2), fork")

    def test_a_padding_id_among_the_probe_tokens(self):
        # The padding id's embedding row is zero, so with no biases that token writes zeros
        # into the zero caches: a probe token that is the padding id decides nothing, and the
        # next token set decides. Padding id 2 (the first probe token) used to get the program
        # refused; 3 (the second) used to leave layer 0's caches "other".
        for pad in (2, 3):
            with self.subTest(pad=pad):
                model = M.llama(pad=pad)
                program = llm.load(llm.export_llm(model, 4, max_context_len=16).buffer)
                caches = [
                    n
                    for n in program.program.buffer_names
                    if "cache" in n and "cumulative" not in n
                ]
                self.assertEqual(program.layout.positional, dict.fromkeys(caches, 2))
                prompt = [5, pad, 9, 13, 7]
                s = program.new_session()
                _assert_close(self, s.prefill(prompt), _eager_logits(model, prompt), "prefill")
                s.rewind(3)
                fork = s.fork()
                s.decode(7)
                _assert_close(
                    self, fork.decode(11), _eager_logits(model, [*prompt[:3], 11]), "fork"
                )

    def test_a_program_with_no_cache_of_max_context_len_is_refused(self):
        with self.assertRaisesRegex(
            ValueError, r"no buffer .* 20 positions .* so none is a KV cache; the buffers are"
        ):
            llm.load(M.export_counting(False, get_max_context_len=20).buffer)

    def test_a_transposed_key_cache_as_long_as_its_head(self):
        # k_cache [1, D, S] and v_cache [1, S, D] with D == S: the shapes cannot say which
        # dimension is the position; the probe tokens do. A fork and a saved session keep the
        # held positions along it, so a wrong dimension shows in their logits.
        program, eager = _load_decoder(M.TransposedKeyDecoder(), M.TRANSPOSED_CAPACITY)
        self.assertEqual(program.layout.positional, {"k_cache": 2, "v_cache": 1})
        prompt = [3, 7, 11, 19, 23, 29]
        s = program.new_session()
        _assert_close(self, s.prefill(prompt), eager(prompt), "prefill")
        s.rewind(3)
        fork = s.fork()
        s.decode(5)  # the parent overwrites position 3 after the fork
        _assert_close(self, fork.decode(12), eager([*prompt[:3], 12]), "rewind(3), fork")
        path = os.path.join(self.create_tempdir().full_path, "transposed.session")
        fork.save(path)
        restored = program.load_session(path)
        _assert_close(self, restored.decode(13), eager([*prompt[:3], 12, 13]), "saved, loaded")

    def test_buffers_that_only_look_like_caches_or_counters_are_kept_whole(self):
        # Each program has a buffer with the shape of a KV cache or of a token counter that is
        # neither: a table indexed by token id, a count of runs per position, a sum of ids that
        # equals the token count for this prompt. Kept by position or set to the count, a
        # rewind, fork or saved session would be wrong; kept whole, each equals eager.
        prompt = [0, 0, 0, 3, 2, 1]
        for kind in ("token_table", "position_counts", "token_sum"):
            with self.subTest(kind):
                program, eager = _load_decoder(
                    M.MisleadingStateDecoder(kind), M.MISLEADING_CAPACITY
                )
                self.assertEqual(program.layout.positional, {"k_cache": 1, "v_cache": 1})
                self.assertEqual(program.layout.counters, frozenset())
                s = program.new_session()
                _assert_close(self, s.prefill(prompt), eager(prompt), "prefill")
                s.rewind(3)
                _assert_close(self, s.decode(5), eager([*prompt[:3], 5]), "rewind(3)")
                kept = s.tokens
                fork = s.fork()
                s.decode(9)
                _assert_close(self, fork.decode(12), eager([*kept, 12]), "fork")
                path = os.path.join(self.create_tempdir().full_path, f"{kind}.session")
                fork.save(path)
                restored = program.load_session(path)
                _assert_close(self, restored.decode(13), eager([*kept, 12, 13]), "saved, loaded")

    def test_a_program_that_reads_past_its_position_after_a_rewind(self):
        # Attention sees every entry a validity buffer marks: after a rewind, entries at the
        # dropped positions must be unmarked again, as in a session that never held them, and
        # so must those of the tokens a rewind runs again (its `total` buffer is restored
        # from a snapshot, or from the initial values when there is none).
        program, eager = _load_decoder(M.MisleadingStateDecoder("validity"), M.MISLEADING_CAPACITY)
        self.assertEqual(program.layout.positional, {"k_cache": 1, "v_cache": 1, "extra": 0})
        self.assertEqual(program.layout.other, ("total",))
        prompt = [3, 7, 11, 19, 23, 29, 31, 37, 41, 43, 2, 5]  # two prefill chunks: 8 + 4
        for budget in (session_module.SNAPSHOT_BUDGET, 0):
            with (
                self.subTest(snapshot_budget=budget),
                mock.patch.object(session_module, "SNAPSHOT_BUDGET", budget),
            ):
                s = program.new_session()
                s.prefill(prompt)
                s.decode(13)
                for n, token in ((12, 17), (3, 5)):
                    s.rewind(n)
                    kept = s.tokens
                    _assert_close(self, s.decode(token), eager([*kept, token]), f"rewind({n})")
                    fresh = program.new_session()
                    fresh.prefill([*kept, token])
                    _assert_same_state(self, s, fresh, f"rewind({n})")

    def test_a_cache_not_indexed_by_position_is_refused(self):
        # Position p at index S - 1 - p: keeping the first n entries would keep the wrong ones,
        # and no other buffer is a KV cache.
        module = M.MisleadingStateDecoder("reversed_cache")
        with self.assertRaisesRegex(
            ValueError, r"48 positions .* each token writes its own position's entries"
        ):
            llm.load(
                M.export_counting(False, module, get_max_context_len=M.MISLEADING_CAPACITY).buffer
            )

    def test_gemma3_with_a_sliding_window(self):
        model, path = _Programs.get("gemma3")
        program = llm.load(path)
        vocab = model.config.vocab_size
        prompt = [3, 9, 27, 81 % vocab, 5, 6, 7]
        s = program.new_session()
        _assert_close(self, s.prefill(prompt), _eager_logits(model, prompt), "prefill")
        generated = list(s.generate(6))
        self.assertEqual(generated, M.greedy_tokens(model, prompt, 6))
        for n in (len(prompt) + 3, 3):
            s.rewind(n)
            kept = s.tokens
            _assert_close(
                self, s.decode(11), _eager_logits(model, [*kept, 11]), f"rewind({n}) then decode"
            )
        fork = s.fork()
        _assert_close(self, fork.decode(12), _eager_logits(model, [*s.tokens, 12]), "fork")

    def test_a_program_without_metadata_needs_max_context_len(self):
        pte = Runfiles.Create().Rlocation("executorch_trt/examples/kv_cache_decode.pte")
        with self.assertRaisesRegex(ValueError, "pass max_context_len="):
            llm.load(pte)
        with self.assertRaisesRegex(ValueError, "fewer than 2 positions"):
            llm.load(pte, max_context_len=1)
        program = llm.load(pte, max_context_len=128)
        with open(
            Runfiles.Create().Rlocation("executorch_trt/examples/kv_cache_decode_reference.json")
        ) as f:
            reference = json.load(f)
        want = [step["token"] for step in reference["steps"]]
        s = program.new_session()
        s.prefill(reference["prompt"])
        self.assertEqual(list(s.generate(len(want))), want)


@delegate_library.needs_library
class StatefulProgramsTest(absltest.TestCase):
    """Rewind on programs whose state is more than positional caches."""

    def _check_rewinds(self, program, expected_other):
        self.assertEqual(program.layout.other, expected_other)
        s = program.new_session()
        s.prefill([1, 2, 3, 4, 5, 6])
        list(s.generate(4))
        self.assertEqual(int(s.state["count"]), 10)
        for n in (7, 2, 5):  # a generated position, inside the prompt, inside a prefill chunk
            s.rewind(n)
            fresh = program.new_session()
            want = fresh.prefill([*s.tokens, 9, 10])
            _assert_close(self, s.prefill([9, 10]), want, f"rewind({n})")
            _assert_same_state(self, s, fresh, f"rewind({n})")
            self.assertEqual(list(s.generate(3)), list(fresh.generate(3)), f"rewind({n})")

    def test_rewind_puts_a_step_counter_back(self):
        self._check_rewinds(llm.load(M.export_counting(summary=False).buffer), ("count",))

    def test_rewind_restores_other_state_and_runs_the_tokens_after_it_again(self):
        self._check_rewinds(llm.load(M.export_counting(summary=True).buffer), ("count", "total"))

    def test_rewind_without_snapshots_starts_from_the_initial_values(self):
        # No snapshot fits the budget: a rewind restores `total` from the program's initial
        # value and runs every kept token again.
        with mock.patch.object(session_module, "SNAPSHOT_BUDGET", 0):
            self._check_rewinds(
                llm.load(M.export_counting(summary=True).buffer), ("count", "total")
            )

    def test_snapshots_stay_within_the_budget(self):
        program = llm.load(M.export_counting(summary=True).buffer)
        one = 8 + 4 * M.COUNTING_DIM  # count (int64) + total (float32 [1, DIM])
        with mock.patch.object(session_module, "SNAPSHOT_BUDGET", 3 * one):
            s = program.new_session()
            s.prefill([1, 2, 3])
            for token in range(4, 12):
                s.decode(token)
            self.assertEqual(sorted(s._snapshots), [9, 10, 11])
            s.rewind(2)  # before every snapshot: from the initial values
            fresh = program.new_session()
            _assert_close(self, s.decode(5), fresh.prefill([1, 2, 5]), "rewind(2)")

    def test_max_context_len_that_contradicts_the_metadata_is_refused(self):
        pte = M.export_counting(summary=False).buffer
        with self.assertRaisesRegex(
            ValueError, r"max_context_len=16 contradicts the program's get_max_context_len \(32\)"
        ):
            llm.load(pte, max_context_len=16)
        self.assertEqual(llm.load(pte, max_context_len=32).max_context_len, 32)


if __name__ == "__main__":
    absltest.main()
