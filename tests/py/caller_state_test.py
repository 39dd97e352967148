"""Caller-owned state from Python: ``Program.buffer_names``, ``buffer``,
``bind_buffer``, ``new_state``, ``bind_state``, against eager PyTorch.

The small model is ``caller_state_models.TinyAttention`` (two ``[1, 32, 8]`` caches); the
prefill/decode test runs the Llama example (``examples/decoder_model.py``). Programs are
exported with ``emit_mutable_buffer_names=True`` (the default).
"""

import copy
import gc

import torch
from absl.testing import absltest

import caller_state_models as csm
import delegate_library
import executorch_trt
from executorch_trt import runtime

TOKENS_A = [3, 7, 1, 12, 5, 9]
TOKENS_B = [4, 4, 15, 0, 2, 11]
CACHES = ("k_cache", "v_cache")


def _steps(method, tokens, start=0):
    return [method.execute(csm.step_inputs(t, start + i))[0] for i, t in enumerate(tokens)]


def _each_step_vs_eager(forward, eager, tokens):
    """Runs ``tokens`` (positions 0, 1, ...) through ``forward`` and the eager ``TinyAttention``
    ``eager``, asserting equal outputs at every step; yields each position after its step (for
    the caller's own checks of the state)."""
    for pos, token in enumerate(tokens):
        (got,) = forward.execute(csm.step_inputs(token, pos))
        with torch.no_grad():
            want = eager(*csm.step_inputs(token, pos))
        torch.testing.assert_close(got, want, msg=f"step {pos}")
        yield pos


def _decode_vs_eager(forward, tokens):
    """``_each_step_vs_eager`` against a fresh eager ``TinyAttention``; returns it (its caches
    are what the program's should now hold)."""
    eager = csm.TinyAttention()
    for _ in _each_step_vs_eager(forward, eager, tokens):
        pass
    return eager


@delegate_library.needs_library
class TinyAttentionStateTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pte = csm.tiny_attention_pte()

    def _load(self):
        prog = runtime.load(self.pte)
        return prog, prog.load_method("forward")

    def test_buffer_names(self):
        prog, _ = self._load()
        self.assertEqual(prog.buffer_names, CACHES)
        self.assertEqual(
            prog.buffer_spec("k_cache"),
            runtime.TensorSpec(torch.float32, (1, csm.CACHE_LEN, csm.WIDTH)),
        )

    def test_buffer_equals_eager_cache_after_every_step(self):
        prog, forward = self._load()
        eager = csm.TinyAttention()
        for name in CACHES:
            self.assertEqual(prog.buffer(name).abs().sum().item(), 0, "fresh load: zeros")
        for pos in _each_step_vs_eager(forward, eager, TOKENS_A):
            for name in CACHES:
                torch.testing.assert_close(
                    prog.buffer(name), getattr(eager, name), msg=f"{name} after step {pos}"
                )

    def test_writes_through_buffer_are_seen_by_the_next_execute(self):
        prog, forward = self._load()
        eager = csm.TinyAttention()
        _steps(forward, TOKENS_A[:3])
        csm.eager_steps(eager, TOKENS_A[:3])
        view = prog.buffer("v_cache")
        view[0, 1] = 10.0  # through the view, into the program's own storage
        eager.v_cache[0, 1] = 10.0
        (got,) = forward.execute(csm.step_inputs(TOKENS_A[3], 3))
        with torch.no_grad():
            want = eager(*csm.step_inputs(TOKENS_A[3], 3))
        torch.testing.assert_close(got, want)
        self.assertEqual(prog.buffer("v_cache").data_ptr(), view.data_ptr(), "same storage")

    def test_bound_tensor_is_updated_in_place(self):
        prog, forward = self._load()
        state = prog.new_state()
        ptrs = {name: t.data_ptr() for name, t in state.items()}
        prog.bind_state(state)
        eager = csm.TinyAttention()
        for pos in _each_step_vs_eager(forward, eager, TOKENS_A):
            for name in CACHES:
                self.assertEqual(state[name].data_ptr(), ptrs[name], f"{name} moved")
                self.assertIs(prog.buffer(name), state[name])
                torch.testing.assert_close(
                    state[name], getattr(eager, name), msg=f"{name} after step {pos}"
                )

    def test_two_interleaved_states_equal_each_alone(self):
        alone = {}
        for key, tokens in (("a", TOKENS_A), ("b", TOKENS_B)):
            prog, forward = self._load()
            state = prog.new_state()
            prog.bind_state(state)
            alone[key] = (_steps(forward, tokens), state)
        prog, forward = self._load()
        states = {"a": prog.new_state(), "b": prog.new_state()}
        outs = {"a": [], "b": []}
        for pos in range(len(TOKENS_A)):
            for key, tokens in (("a", TOKENS_A), ("b", TOKENS_B)):
                prog.bind_state(states[key])
                outs[key].append(forward.execute(csm.step_inputs(tokens[pos], pos))[0])
        for key in ("a", "b"):
            want_outs, want_state = alone[key]
            for pos, (got, want) in enumerate(zip(outs[key], want_outs)):
                self.assertTrue(torch.equal(got, want), f"session {key} step {pos}")
            for name in CACHES:
                self.assertTrue(
                    torch.equal(states[key][name], want_state[name]), f"session {key} {name}"
                )
        self.assertFalse(torch.equal(outs["a"][-1], outs["b"][-1]), "the sessions differ")

    def test_reset_gives_a_fresh_conversation(self):
        prog, forward = self._load()
        fresh = _steps(forward, TOKENS_B[:2])
        prog.bind_state(prog.new_state())
        _steps(forward, TOKENS_A)
        prog.bind_state(prog.new_state())  # reset by a new state
        again = _steps(forward, TOKENS_B[:2])
        state = prog.new_state()
        prog.bind_state(state)
        _steps(forward, TOKENS_A)
        for t in state.values():
            t.zero_()  # reset by zeroing the bound tensors
        zeroed = _steps(forward, TOKENS_B[:2])
        for pos in range(2):
            self.assertTrue(torch.equal(again[pos], fresh[pos]), f"new_state, step {pos}")
            self.assertTrue(torch.equal(zeroed[pos], fresh[pos]), f"zeroed, step {pos}")

    def test_snapshot_restore_reproduces_the_continuation_bit_for_bit(self):
        prog, forward = self._load()
        state = prog.new_state()
        prog.bind_state(state)
        _steps(forward, TOKENS_A[:3])  # the "prompt"
        snapshot = {name: t.clone() for name, t in state.items()}
        first = _steps(forward, TOKENS_A[3:], start=3)
        _steps(forward, TOKENS_B, start=0)  # something else in between
        for _ in range(2):
            prog.bind_state({name: t.clone() for name, t in snapshot.items()})
            again = _steps(forward, TOKENS_A[3:], start=3)
            for i, (got, want) in enumerate(zip(again, first)):
                self.assertTrue(torch.equal(got, want), f"step {3 + i}")

    def test_bound_tensor_deleted_by_the_caller_stays_valid(self):
        prog, forward = self._load()
        prog.bind_buffer("k_cache", torch.zeros(1, csm.CACHE_LEN, csm.WIDTH))
        prog.bind_state({"v_cache": torch.zeros(1, csm.CACHE_LEN, csm.WIDTH)}, partial=True)
        gc.collect()
        garbage = [torch.full((1, csm.CACHE_LEN, csm.WIDTH), 7.0) for _ in range(64)]
        eager = _decode_vs_eager(forward, TOKENS_A)
        for name in CACHES:
            torch.testing.assert_close(prog.buffer(name), getattr(eager, name))
        del garbage

    def test_buffer_view_keeps_the_program_alive(self):
        view = runtime.load(self.pte).buffer("k_cache")
        gc.collect()
        garbage = [bytearray(b"\xff" * 4096) for _ in range(64)]
        self.assertEqual(view.abs().sum().item(), 0)
        del garbage

    def test_bind_errors(self):
        prog, _ = self._load()
        good = torch.zeros(1, csm.CACHE_LEN, csm.WIDTH)
        with self.assertRaisesRegex(
            KeyError,
            r"no mutable buffer named 'nope'.*\['k_cache', "
            r"'v_cache'\]",
        ):
            prog.bind_buffer("nope", good)
        with self.assertRaisesRegex(KeyError, "no mutable buffer named 'nope'"):
            prog.buffer("nope")
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'k_cache': it is float32 \[1, 32, 8\].*"
            r"it is float16 \[1, 32, 8\]",
        ):
            prog.bind_buffer("k_cache", good.half())
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'k_cache': it is float32 \[1, 32, 8\].*"
            r"it is float32 \[1, 16, 8\]",
        ):
            prog.bind_buffer("k_cache", torch.zeros(1, 16, 8))
        with self.assertRaisesRegex(ValueError, "buffer 'v_cache'.*not contiguous"):
            prog.bind_buffer("v_cache", torch.zeros(1, csm.WIDTH, csm.CACHE_LEN).transpose(1, 2))
        with self.assertRaisesRegex(
            TypeError, "bind_buffer\\('k_cache'\\): expected a torch.Tensor"
        ):
            prog.bind_buffer("k_cache", [0.0])
        # One bad entry: nothing of the state is bound.
        before = prog.buffer("k_cache")
        with self.assertRaisesRegex(ValueError, "buffer 'v_cache'"):
            prog.bind_state({"k_cache": good, "v_cache": good[:, :4]})
        self.assertEqual(prog.buffer("k_cache").data_ptr(), before.data_ptr())

    def test_bound_tensor_moved_by_the_caller_raises_until_rebound(self):
        # The program keeps the bound storage alive and refuses to run on memory the tensor
        # left (set_ kept it alive; a reallocating resize_ freed it): no use after free.
        prog, forward = self._load()
        state = prog.new_state()
        prog.bind_state(state)
        _steps(forward, TOKENS_A[:2])
        k = state["k_cache"]
        k.set_(torch.zeros(1, csm.CACHE_LEN, csm.WIDTH))
        with self.assertRaisesRegex(
            RuntimeError,
            r"buffer 'k_cache': the tensor bound to it no "
            r"longer views the memory.*bind_buffer",
        ):
            forward.execute(csm.step_inputs(1, 2))
        with self.assertRaisesRegex(RuntimeError, "buffer 'k_cache'.*no longer views"):
            prog.buffer("k_cache")
        # Binding another buffer alone is refused too; binding both is fine.
        with self.assertRaisesRegex(RuntimeError, "buffer 'k_cache'.*no longer views"):
            prog.bind_buffer("v_cache", torch.zeros(1, csm.CACHE_LEN, csm.WIDTH))
        v = state["v_cache"]
        v.resize_(64, 1024)  # reallocates: the memory bound is freed
        v.resize_(1, csm.CACHE_LEN, csm.WIDTH).zero_()
        k.zero_()
        with self.assertRaisesRegex(RuntimeError, "buffer '(k|v)_cache'.*no longer views"):
            forward.execute(csm.step_inputs(1, 0))
        prog.bind_state({"k_cache": k, "v_cache": v})  # rebound: runs from the zeroed state
        eager = _decode_vs_eager(forward, TOKENS_B[:3])
        for name, t in (("k_cache", k), ("v_cache", v)):
            torch.testing.assert_close(t, getattr(eager, name), msg=name)
            self.assertIs(prog.buffer(name), t)

    def test_overlapping_bindings_are_rejected(self):
        prog, forward = self._load()
        shape = (1, csm.CACHE_LEN, csm.WIDTH)
        one = torch.zeros(shape)
        with self.assertRaisesRegex(ValueError, "'k_cache'.*overlaps buffer 'v_cache'"):
            prog.bind_state({"k_cache": one, "v_cache": one})
        big = torch.zeros(1, csm.CACHE_LEN + 1, csm.WIDTH)
        with self.assertRaisesRegex(ValueError, "'k_cache'.*overlaps buffer 'v_cache'"):
            prog.bind_state({"k_cache": big[:, :-1], "v_cache": big[:, 1:]})
        # Against what is bound already, or the program's own storage of another buffer.
        prog.bind_buffer("k_cache", one)
        with self.assertRaisesRegex(
            ValueError, r"'v_cache'.*overlaps buffer 'k_cache' \(its current storage\)"
        ):
            prog.bind_buffer("v_cache", one)
        fresh, _ = self._load()
        with self.assertRaisesRegex(ValueError, "'v_cache'.*overlaps buffer 'k_cache'"):
            fresh.bind_buffer("v_cache", fresh.buffer("k_cache"))
        # Rebinding the same tensor, swapping two tensors and disjoint views are fine.
        state = prog.new_state()
        prog.bind_state(state)
        prog.bind_state(state)
        prog.bind_state({"k_cache": state["v_cache"], "v_cache": state["k_cache"]})
        slab = torch.full((3, *shape), 7.0)
        prog.bind_state({"k_cache": slab[0].zero_(), "v_cache": slab[2].zero_()})
        eager = _decode_vs_eager(forward, TOKENS_A)
        torch.testing.assert_close(slab[0], eager.k_cache)
        torch.testing.assert_close(slab[2], eager.v_cache)
        self.assertTrue(bool((slab[1] == 7).all()), "the slab between them is untouched")

    def test_bind_rejects_sparse_and_lazy_negative_tensors(self):
        prog, _ = self._load()
        zeros = torch.zeros(1, csm.CACHE_LEN, csm.WIDTH)
        with self.assertRaisesRegex(
            ValueError, "buffer 'k_cache'.*not dense: its layout is torch.sparse_coo"
        ):
            prog.bind_buffer("k_cache", zeros.to_sparse())
        with self.assertRaisesRegex(ValueError, "buffer 'k_cache'.*negative bit set.*resolve_neg"):
            prog.bind_buffer("k_cache", torch._neg_view(zeros))

    def test_execute_resolves_a_lazy_negative_input(self):
        _, forward = self._load()
        (want,) = forward.execute(csm.step_inputs(5, 3))
        _, forward = self._load()
        token, pos = csm.step_inputs(5, 3)
        (got,) = forward.execute([token, torch._neg_view(-pos)])
        self.assertTrue(torch.equal(got, want))
        with self.assertRaisesRegex(ValueError, "input 1: a tensor of layout torch.sparse_coo"):
            forward.execute([token, pos.to_sparse()])

    def test_out_of_range_int_input_is_a_value_error(self):
        _, forward = self._load()
        with self.assertRaisesRegex(
            ValueError, "input 0: the int 1180591620717411303424 does not fit in int64"
        ):
            forward.execute([2**70, torch.tensor([0])])
        with self.assertRaisesRegex(ValueError, "input 1: the int .* does not fit in int64"):
            forward.execute([torch.tensor([[1]]), -(2**63) - 1])

    def test_execute_failure_hints_only_what_applies(self):
        _, forward = self._load()
        with self.assertRaisesRegex(RuntimeError, "method 'forward': execute failed") as e:
            forward.execute(csm.step_inputs(1, csm.CACHE_LEN))  # position out of the cache
        self.assertNotIn("alloc_mutable_buffers", str(e.exception))
        # The reason the kernel logged is in the exception, not only on stderr.
        self.assertRegex(
            str(e.exception),
            r"execute failed \(error 18: InvalidArgument\); ExecuTorch logged:\n"
            r"  kv_cache_update: indices\[0\] = 32 is outside \[0, 32\)",
        )

    def test_load_from_a_text_mode_file_says_binary(self):
        path = self.create_tempfile(content=self.pte, mode="wb").full_path
        with (
            open(path, errors="ignore") as f,
            self.assertRaisesRegex(TypeError, "text mode.*open the file in binary mode") as e,
        ):
            runtime.load(f)
        self.assertLess(len(str(e.exception)), 400, "no dump of the file's contents")
        with open(path, "rb") as f:
            self.assertEqual(runtime.load(f).buffer_names, CACHES)

    def test_program_without_names_says_which_option(self):
        prog = runtime.load(csm.tiny_attention_pte(emit_mutable_buffer_names=False))
        self.assertEqual(prog.buffer_names, ())
        with self.assertRaisesRegex(KeyError, "emit_mutable_buffer_names=True"):
            prog.buffer("k_cache")
        with self.assertRaisesRegex(KeyError, "emit_mutable_buffer_names=True"):
            prog.bind_buffer("k_cache", torch.zeros(1, csm.CACHE_LEN, csm.WIDTH))

    def test_program_without_names_has_no_sessions(self):
        # Without names no state can be bound: an empty "state" would leave every session on
        # the program's one cache. new_state, bind_state and execute(state=...) refuse.
        prog = runtime.load(csm.tiny_attention_pte(emit_mutable_buffer_names=False))
        forward = prog.load_method("forward")
        option = (
            r"this program has no named mutable buffers.*"
            r"emit_mutable_buffer_names=True \(the default of executorch_trt.export.*"
            r"a program with no state needs no session"
        )
        with self.assertRaisesRegex(RuntimeError, r"new_state\(\): " + option):
            prog.new_state()
        for partial in (False, True):
            with self.assertRaisesRegex(RuntimeError, r"bind_state\(\): " + option):
                prog.bind_state({}, partial=partial)
        with self.assertRaisesRegex(RuntimeError, r"bind_state\(\): " + option):
            forward.execute(csm.step_inputs(9, 0), state={})  # would write row 0 if it ran
        # Nothing ran: a step at position 1 sees row 0 still zero, as a fresh eager model does.
        (got,) = forward.execute(csm.step_inputs(TOKENS_A[1], 1))
        with torch.no_grad():
            want = csm.TinyAttention()(*csm.step_inputs(TOKENS_A[1], 1))
        torch.testing.assert_close(got, want)

    def test_partial_state_is_refused_and_keeps_the_current_session(self):
        prog, forward = self._load()
        alice, bob = prog.new_state(), prog.new_state()
        prog.bind_state(alice)
        _steps(forward, TOKENS_A[:3])
        with self.assertRaisesRegex(
            ValueError,
            r"bind_state\(\): the state has no tensor for "
            r"buffer\(s\) \['v_cache'\].*partial=True",
        ):
            prog.bind_state({"k_cache": bob["k_cache"]})
        with self.assertRaisesRegex(ValueError, r"no tensor for buffer\(s\) \['k_cache'\]"):
            forward.execute(csm.step_inputs(TOKENS_B[0], 0), state={"v_cache": bob["v_cache"]})
        with self.assertRaisesRegex(
            ValueError,
            r"no tensor for buffer\(s\) "
            r"\['k_cache', 'v_cache'\]",
        ):
            prog.bind_state({})
        for name in CACHES:
            self.assertIs(prog.buffer(name), alice[name], name)
            self.assertEqual(bob[name].abs().sum().item(), 0, f"bob's {name} untouched")
        # alice's conversation continues as if nothing had been asked: vs eager on all tokens.
        eager = csm.TinyAttention()
        want = csm.eager_steps(eager, TOKENS_A)[3:]
        got = _steps(forward, TOKENS_A[3:], start=3)
        for i, (g, w) in enumerate(zip(got, want)):
            torch.testing.assert_close(g, w, msg=f"step {3 + i}")
        for name in CACHES:
            torch.testing.assert_close(alice[name], getattr(eager, name), msg=name)

    def test_partial_true_binds_only_the_buffers_given(self):
        prog, forward = self._load()
        alice = prog.new_state()
        prog.bind_state(alice)
        _steps(forward, TOKENS_A[:3])
        eager = csm.TinyAttention()
        csm.eager_steps(eager, TOKENS_A[:3])
        fresh_v = torch.zeros(1, csm.CACHE_LEN, csm.WIDTH)
        prog.bind_state({"v_cache": fresh_v}, partial=True)
        self.assertIs(prog.buffer("v_cache"), fresh_v)
        self.assertIs(prog.buffer("k_cache"), alice["k_cache"])
        eager.v_cache.zero_()  # the same state in eager: alice's keys, fresh values
        (got,) = forward.execute(csm.step_inputs(TOKENS_A[3], 3))
        with torch.no_grad():
            want = eager(*csm.step_inputs(TOKENS_A[3], 3))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(fresh_v, eager.v_cache)
        torch.testing.assert_close(alice["k_cache"], eager.k_cache)
        self.assertEqual(alice["v_cache"][0, 3].abs().sum().item(), 0, "alice's values unbound")
        # execute(state=..., partial=True) the same way, in one call.
        fresh_k = torch.zeros(1, csm.CACHE_LEN, csm.WIDTH)
        eager.k_cache.zero_()
        (got,) = forward.execute(
            csm.step_inputs(TOKENS_A[4], 4), state={"k_cache": fresh_k}, partial=True
        )
        with torch.no_grad():
            want = eager(*csm.step_inputs(TOKENS_A[4], 4))
        torch.testing.assert_close(got, want)
        self.assertIs(prog.buffer("k_cache"), fresh_k)
        self.assertIs(prog.buffer("v_cache"), fresh_v)
        torch.testing.assert_close(fresh_k, eager.k_cache)

    def test_execute_errors_name_the_input(self):
        _, forward = self._load()
        with self.assertRaisesRegex(ValueError, "method 'forward' takes 2 inputs, got 1"):
            forward.execute([torch.tensor([[1]])])
        with self.assertRaisesRegex(
            ValueError,
            r"input 1 is tensor Float \[1\], expected tensor "
            r"Long \[1\]",
        ):
            forward.execute([torch.tensor([[1]]), torch.tensor([0.0])])
        with self.assertRaisesRegex(TypeError, "input 0: expected a torch.Tensor.*got str"):
            forward.execute(["x", torch.tensor([0])])


@delegate_library.needs_library
class UnplannedStateTest(absltest.TestCase):
    """``alloc_mutable_buffers=False``: the caller provides every buffer's memory."""

    def test_bind_before_execute(self):
        prog = runtime.load(csm.tiny_attention_pte(alloc_mutable_buffers=False))
        forward = prog.load_method("forward")
        with self.assertRaisesRegex(RuntimeError, "'k_cache' has no storage.*bind_buffer"):
            prog.buffer("k_cache")
        with self.assertRaisesRegex(
            RuntimeError,
            "method 'forward': buffer 'k_cache' has no storage.*alloc_mutable_buffers=False.*bind",
        ):
            forward.execute(csm.step_inputs(1, 0))
        prog.bind_buffer("k_cache", torch.zeros(1, csm.CACHE_LEN, csm.WIDTH))
        with self.assertRaisesRegex(RuntimeError, "buffer 'v_cache' has no storage"):
            forward.execute(csm.step_inputs(1, 0))
        state = prog.new_state()
        prog.bind_state(state)
        eager = _decode_vs_eager(forward, TOKENS_A[:3])
        for name in CACHES:
            torch.testing.assert_close(state[name], getattr(eager, name))


class InitialValue(torch.nn.Module):
    """A buffer with a non-zero exported value, overwritten in place by each call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("rows", torch.arange(12.0).view(1, 3, 4))

    def forward(self, x, pos):  # x [1, 1, 4], pos [1]
        self.rows.index_copy_(1, pos, x)
        return self.rows.sum(1)


@delegate_library.needs_library
class InitialValueTest(absltest.TestCase):
    def test_new_state_holds_the_exported_value(self):
        x, pos = torch.ones(1, 1, 4), torch.tensor([1])
        with torch.no_grad():
            pte = executorch_trt.export(
                torch.export.export(InitialValue(), (x, pos)), emit_mutable_buffer_names=True
            ).buffer
        prog = runtime.load(pte)
        want = torch.arange(12.0).view(1, 3, 4)
        self.assertTrue(torch.equal(prog.buffer("rows"), want))
        prog.load_method("forward").execute([x, pos])
        self.assertFalse(torch.equal(prog.buffer("rows"), want))
        self.assertTrue(torch.equal(prog.new_state()["rows"], want), "still the initial value")

    def test_buffer_without_elements_reads_as_empty(self):
        class EmptyBuffer(torch.nn.Module):  # the program's only buffer: no memory planned
            def __init__(self):
                super().__init__()
                self.register_buffer("none", torch.zeros(0, 4))

            def forward(self, x):
                self.none.add_(1)
                return x * 2, self.none + 1

        with torch.no_grad():
            pte = executorch_trt.export(
                torch.export.export(EmptyBuffer(), (torch.ones(4),)), emit_mutable_buffer_names=True
            ).buffer
        prog = runtime.load(pte)
        prog.load_method("forward").execute([torch.ones(4)])
        self.assertEqual(prog.buffer("none").shape, (0, 4))


@delegate_library.needs_library
class LlamaPrefillDecodeStateTest(absltest.TestCase):
    """The Llama example as prefill + decode on caller-owned caches: both methods read and
    write the bound tensors (prefill writes, decode reads), equal to eager's caches after every
    step; a snapshot after prefill restores the continuation bit for bit."""

    MAX_SEQ_LEN = 32
    PROMPT_LEN = 5
    DECODE_STEPS = 4

    @classmethod
    def setUpClass(cls):
        from decoder_model import build_model, cache_buffers, exportable_decoder

        cls.model = build_model(cls.MAX_SEQ_LEN)
        cls.exportable_decoder = staticmethod(exportable_decoder)
        cls.cache_buffers = staticmethod(cache_buffers)
        torch.manual_seed(5)
        cls.prompt = torch.randint(0, cls.model.config.vocab_size, (1, cls.PROMPT_LEN))
        decoder = exportable_decoder(cls.model, cls.MAX_SEQ_LEN)
        with torch.no_grad():
            cls.pte = executorch_trt.export(
                {
                    "prefill": torch.export.export(
                        decoder, (cls.prompt, torch.arange(cls.PROMPT_LEN)), strict=False
                    ),
                    "decode": torch.export.export(
                        decoder, (torch.tensor([[0]]), torch.tensor([cls.PROMPT_LEN])), strict=False
                    ),
                },
                emit_mutable_buffer_names=True,
            ).buffer

    def _decode(self, prog, first_token, steps):
        decode = prog.load_method("decode")
        token, logits = first_token, []
        for step in range(steps):
            (out,) = decode.execute(
                [torch.tensor([[token]]), torch.tensor([self.PROMPT_LEN + step])]
            )
            logits.append(out)
            token = int(out[0, -1].argmax())
        return logits

    def test_bound_caches_follow_eager_through_prefill_and_decode(self):
        prog = runtime.load(self.pte)
        names = list(self.cache_buffers(self.exportable_decoder(self.model, self.MAX_SEQ_LEN)))
        self.assertTrue(set(names) <= set(prog.buffer_names), prog.buffer_names)
        state = prog.new_state()
        ptrs = {name: t.data_ptr() for name, t in state.items()}
        prog.bind_state(state)
        eager = self.exportable_decoder(self.model, self.MAX_SEQ_LEN)
        with torch.no_grad():
            want = eager(self.prompt, torch.arange(self.PROMPT_LEN))
        (got,) = prog.load_method("prefill").execute([self.prompt, torch.arange(self.PROMPT_LEN)])
        for step in range(self.DECODE_STEPS + 1):
            where = f"step {step}"
            scale = max(1.0, want.abs().max().item())
            torch.testing.assert_close(
                got[:, -1], want[:, -1], atol=1e-4 * scale, rtol=0, msg=where
            )
            token = int(want[0, -1].argmax())
            self.assertEqual(int(got[0, -1].argmax()), token, where)
            for name in names:
                self.assertEqual(state[name].data_ptr(), ptrs[name], f"{where}: {name} moved")
                self.assertGreater(state[name].abs().sum().item(), 0, f"{where}: {name} unwritten")
                torch.testing.assert_close(
                    state[name], getattr(eager, name), atol=1e-5, rtol=1e-5, msg=f"{where}: {name}"
                )
            if step == self.DECODE_STEPS:
                break
            pos = torch.tensor([self.PROMPT_LEN + step])
            with torch.no_grad():
                want = eager(torch.tensor([[token]]), pos)
            (got,) = prog.load_method("decode").execute([torch.tensor([[token]]), pos])

    def test_prefix_snapshot_reproduces_the_continuation(self):
        prog = runtime.load(self.pte)
        state = prog.new_state()
        prog.bind_state(state)
        (logits,) = prog.load_method("prefill").execute(
            [self.prompt, torch.arange(self.PROMPT_LEN)]
        )
        first_token = int(logits[0, -1].argmax())
        prefix = {name: t.clone() for name, t in state.items()}
        first = self._decode(prog, first_token, self.DECODE_STEPS)
        prog.bind_state(prog.new_state())  # another conversation in between
        prog.load_method("prefill").execute([self.prompt.flip(1), torch.arange(self.PROMPT_LEN)])
        prog.bind_state(copy.deepcopy(prefix))
        again = self._decode(prog, first_token, self.DECODE_STEPS)
        for step, (a, b) in enumerate(zip(again, first)):
            self.assertTrue(torch.equal(a, b), f"decode step {step}")


if __name__ == "__main__":
    absltest.main()
