"""``Session``: one conversation with an LLM program, whose state (every mutable buffer: the KV
caches, step counters) is tensors the session owns.

Each call binds the session's state and runs under one hold of the program's lock
(``runtime.Method.execute(inputs, state=...)``), so sessions are isolated and may run from
different threads; one session is used by one thread at a time (its own lock serialises
calls on it). The delegate updates the session's tensors in place: a step copies no state.

What a session keeps, and why its operations are cheap (``state_layout``):

* ``tokens``: the ids it holds, at positions ``0 .. position - 1``.
* The KV caches: the entry at position ``p`` is the token at ``p``'s; entries past
  ``position`` hold their initial values. So ``rewind(n)`` copies no held entry (it only
  resets the dropped ones), and ``fork`` copies only the first ``position`` entries.
* The other buffers (e.g. transformers' per-layer ``cumulative_length`` counters, which say
  where the next token is written): a token counter (an integer scalar the load-time probe saw
  count tokens, ``state_layout``) that holds the number of tokens held is restored by setting
  it to ``n``; any other is restored from its value after the call that ended at the
  nearest held position, and the tokens after that position are run again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import torch

from executorch_trt.llm.sampling import SamplingConfig, next_token
from executorch_trt.llm.session_file import SavedSession, write_session
from executorch_trt.llm.state_layout import is_token_count

if TYPE_CHECKING:
    from executorch_trt.llm.program import LLMProgram

#: The most bytes a session keeps in snapshots of its non-positional buffers (taken after each
#: call; the oldest are dropped first). Snapshots only save work: a rewind restores those
#: buffers from the nearest snapshot at or before its position, else from the program's
#: initial values, and runs the tokens after it again.
SNAPSHOT_BUDGET = 16 << 20

Tokens = Sequence[int] | torch.Tensor


class Session:
    """One conversation (module docstring). Made by ``LLMProgram.new_session``, ``fork``,
    ``LLMProgram.load_session``."""

    def __init__(
        self,
        model: LLMProgram,
        state: dict[str, torch.Tensor] | None = None,
        tokens: Sequence[int] = (),
    ) -> None:
        self.model = model
        self._layout = model.layout
        self._state: dict[str, torch.Tensor] | None = (
            state if state is not None else model.program.new_state()
        )
        self._tokens: list[int] = list(tokens)
        #: Logits of the last token held ([vocab]), None when not computed (after a rewind).
        self._logits: torch.Tensor | None = None
        self._lock = threading.RLock()
        other = self._layout.other
        #: Bytes of one snapshot (every other buffer).
        self._snapshot_bytes = sum(
            self._state[n].numel() * self._state[n].element_size() for n in other
        )
        #: The layout's token counters that have held the number of tokens held after every
        #: call so far.
        self._counters = {
            n for n in self._layout.counters if is_token_count(self._state[n], len(self._tokens))
        }
        #: position -> the other buffers' values after the call that ended there.
        self._snapshots: dict[int, dict[str, torch.Tensor]] = {}
        self._record()
        self.reused_tokens = 0

    # --- what it holds ------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """How many tokens the session holds; the next token goes at this position."""
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        """The ids the session holds, in order (a copy)."""
        return list(self._tokens)

    @property
    def state(self) -> dict[str, torch.Tensor]:
        """The session's state: ``{buffer name: tensor}`` (its own tensors; the program updates
        them in place). Read between calls; do not resize or replace them."""
        return dict(self._live_state())

    @property
    def closed(self) -> bool:
        return self._state is None

    def close(self) -> None:
        """Frees the session's state; any later use raises ``RuntimeError``."""
        with self._lock:
            self._state = None
            self._snapshots.clear()
            self._logits = None

    def _live_state(self) -> dict[str, torch.Tensor]:
        if self._state is None:
            raise RuntimeError(
                "this session is closed (close() freed its state); start a new "
                "one with new_session() or fork() before closing"
            )
        return self._state

    # --- running tokens -----------------------------------------------------------------------

    def prefill(self, tokens: Tokens) -> torch.Tensor:
        """Runs ``tokens`` (``list[int]`` or a 1-D integer tensor, at least one) after the ones
        held, in chunks of at most ``max_seq_len``; returns the logits of the last one
        (float32 ``[vocab]``, a copy). A new session's first prefill reuses the longest prefix
        of ``tokens`` that the program's prefix cache holds (``reused_tokens`` says how many;
        ``LLMProgram.prefix_cache``).

        Raises ``TypeError`` for ids that are not ints, ``ValueError`` for no tokens, an id
        outside ``[0, vocab_size)`` (naming its index) or more tokens than fit (saying how many
        do), ``RuntimeError`` when the program fails or the session is closed; nothing is run
        then (a failure mid-way keeps the chunks that ran)."""
        ids = self._check_tokens(tokens, "prefill")
        with self._lock:
            self._live_state()
            self._check_room(len(ids), "prefill")
            cache = self.model._prefix_cache
            self.reused_tokens = 0
            if cache is not None and self.position == 0 and cache.max_bytes:
                reused = cache.restore(ids, self)
                self.reused_tokens = reused
                ids = ids[reused:]
            if ids:
                self._advance(ids)
            assert self._logits is not None
            if cache is not None and cache.max_bytes:
                cache.store(self)
            return self._logits.clone()

    def decode(self, token: int) -> torch.Tensor:
        """Runs one token after the ones held; returns its logits (float32 ``[vocab]``). Raises
        ``ValueError`` on an empty session (prefill a prompt first), for an id outside the
        vocabulary or a full cache, as ``prefill`` otherwise."""
        ids = self._check_tokens([token], "decode")
        with self._lock:
            self._live_state()
            if not self._tokens:
                raise ValueError("decode: the session holds no tokens; prefill a prompt first")
            self._check_room(1, "decode")
            self._advance(ids)
            assert self._logits is not None
            return self._logits.clone()

    def generate(
        self,
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop_tokens: Iterable[int] | None = (),
    ) -> Iterator[int]:
        """Yields up to ``max_new_tokens`` new token ids, each chosen from the logits of the one
        before (``sampling.SamplingConfig``: greedy when ``temperature == 0``) and run before it
        is yielded, so the session holds every token yielded. Stops after a token of
        ``stop_tokens`` (it is held too) or when the cache is full.

        Raises ``ValueError`` on an empty session (prefill first), for a negative
        ``max_new_tokens`` and bad sampling settings (when the iteration starts)."""
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or max_new_tokens < 0
        ):
            raise ValueError(
                f"generate: max_new_tokens must be an int >= 0, got {max_new_tokens!r}"
            )
        config = SamplingConfig(temperature, top_k, top_p, seed)
        stop = set() if stop_tokens is None else {int(t) for t in stop_tokens}
        return self._generate(max_new_tokens, config, stop)

    def _generate(
        self, max_new_tokens: int, config: SamplingConfig, stop: set[int]
    ) -> Iterator[int]:
        generator = config.generator()
        for _ in range(max_new_tokens):
            with self._lock:
                logits = self._current_logits("generate")
                if self.position >= self._layout.capacity:
                    return
                token = next_token(logits, config, generator)
                self._advance([token])
            yield token
            if token in stop:
                return

    def _current_logits(self, call: str) -> torch.Tensor:
        """The last held token's logits, run again when a rewind or a load dropped them."""
        self._live_state()
        if self._logits is None:
            if not self._tokens:
                raise ValueError(f"{call}: the session holds no tokens; prefill a prompt first")
            last = self._tokens[-1]
            self._rewind(self.position - 1)
            self._advance([last])
        assert self._logits is not None
        return self._logits

    def _advance(self, ids: list[int]) -> None:
        """Runs ``ids`` after the held tokens (the caller checked them and holds the lock)."""
        model = self.model
        chunk = model.max_seq_len
        while ids:
            n = min(len(ids), chunk)
            if model.prefill_is_dynamic is False and 1 < n < chunk:
                n = 1  # a static prefill takes exactly max_seq_len tokens: the rest one by one
            try:
                self._run(ids[:n])
            except ValueError:
                if model.prefill_is_dynamic is not None or n in (1, chunk):
                    raise
                # The prefill method rejected a shorter chunk: it was exported for one length.
                model.prefill_is_dynamic = False
                continue
            if 1 < n < chunk:
                model.prefill_is_dynamic = True
            ids = ids[n:]

    def _run(self, ids: list[int]) -> None:
        """One call of the program on ``ids`` at the next positions; updates what the session
        keeps."""
        model = self.model
        start = self.position
        method = model.decode_method if len(ids) == 1 else model.prefill_method
        tokens = torch.tensor([ids], dtype=torch.long)
        if model.positions_are_start:
            positions = torch.tensor([start], dtype=torch.long)
        else:
            positions = torch.arange(start, start + len(ids), dtype=torch.long)
        outputs = model.program.load_method(method).execute(
            [tokens, positions], state=self._live_state()
        )
        logits = outputs[0]
        self._logits = logits.reshape(-1, logits.shape[-1])[-1].to(torch.float32)
        self._tokens.extend(ids)
        self._record()

    def _record(self) -> None:
        """After a call: which other buffers are still token counters, and a snapshot of the
        other buffers at this position."""
        state = self._live_state()
        self._counters = {n for n in self._counters if is_token_count(state[n], self.position)}
        if self._layout.other and self._snapshot_bytes <= SNAPSHOT_BUDGET:
            self._snapshots[self.position] = {n: state[n].clone() for n in self._layout.other}
            self._trim_snapshots()

    def _trim_snapshots(self) -> None:
        """Drops the oldest snapshots until they fit in ``SNAPSHOT_BUDGET``."""
        while len(self._snapshots) * self._snapshot_bytes > SNAPSHOT_BUDGET:
            del self._snapshots[min(self._snapshots)]

    # --- rewind, fork -------------------------------------------------------------------------

    def rewind(self, n: int) -> None:
        """Keeps the first ``n`` tokens; the next token goes at position ``n``. Later calls
        give what a session that never held the dropped tokens gives. The caches' held
        entries are not copied; the dropped positions' entries are reset to their initial
        values (zeros, for a cache exported without one), so that a program that reads past
        its position sees what it would in a session that never held them.

        Buffers that are not positional and not token counters are restored from the nearest
        snapshot at or before ``n`` (else the program's initial values) and the tokens after
        it run again (``SNAPSHOT_BUDGET``).

        Raises ``ValueError`` for ``n`` outside ``[0, position]``; ``RuntimeError`` for a
        closed session or when running the tokens again fails."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"rewind: n must be an int, got {n!r}")
        with self._lock:
            self._live_state()
            if not 0 <= n <= self.position:
                raise ValueError(
                    f"rewind({n}): the session holds {self.position} tokens; n "
                    f"must be in [0, {self.position}]"
                )
            self._rewind(n)

    def _rewind(self, n: int) -> None:
        if n == self.position:
            return
        end = self.position
        state = self._live_state()
        other = [name for name in self._layout.other if name not in self._counters]
        replay: list[int] = []
        if other:
            boundary = max((p for p in self._snapshots if p <= n), default=None)
            if boundary is None:
                program = self.model.program
                boundary, values = 0, {name: program.initial_value(name) for name in other}
            else:
                values = self._snapshots[boundary]
            for name in other:
                state[name].copy_(values[name])
            replay = self._tokens[boundary:n]
            n = boundary
        for name in self._counters:
            state[name].fill_(n)
        del self._tokens[n:]
        # From the replay's start: the tokens run again must not see their own old entries.
        self._reset_dropped(n, end)
        for p in [p for p in self._snapshots if p > n]:
            del self._snapshots[p]
        self._logits = None
        if replay:
            self._advance(replay)

    def _reset_dropped(self, start: int, end: int) -> None:
        """Puts the positional buffers' entries at positions ``start .. end - 1`` back to
        their initial values, so that every entry past the tokens held is as in a session
        that never held the dropped tokens (a program may read entries past its position,
        e.g. through a validity mask kept in a buffer)."""
        state = self._live_state()
        initial = self.model.nonzero_initial
        for name in self._layout.positional:
            dropped = self._layout.dropped(name, state[name], start, end)
            if name in initial:
                dropped.copy_(self._layout.dropped(name, initial[name], start, end))
            else:
                dropped.zero_()

    def fork(self) -> Session:
        """An independent session holding the same tokens and state: the first ``position``
        entries of each cache and the other buffers are copied into new tensors (``StateLayout.
        held_bytes(position)`` bytes). The two then diverge independently."""
        with self._lock:
            state = self._live_state()
            fresh = self.model.program.new_state()
            for name, tensor in state.items():
                self._layout.held(name, fresh[name], self.position).copy_(
                    self._layout.held(name, tensor, self.position)
                )
            child = Session(self.model, fresh, self._tokens)
            child._adopt(self)
            return child

    @staticmethod
    def restored(model: LLMProgram, saved: SavedSession) -> Session:
        """The session ``saved`` (``session_file.read_session``) describes."""
        session = Session(model, saved.state, saved.tokens)
        session._logits = saved.logits
        session._counters = set(saved.counters)
        if saved.snapshots:
            session._snapshots = saved.snapshots
            session._trim_snapshots()
        return session

    def _adopt(self, other: Session) -> None:
        """Takes ``other``'s bookkeeping (same tokens and state values)."""
        self._logits = None if other._logits is None else other._logits.clone()
        self._counters = set(other._counters)
        self._snapshots = {
            p: {n: t.clone() for n, t in snap.items()} for p, snap in other._snapshots.items()
        }

    # --- save ---------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the conversation to ``path`` atomically (``session_file``): token ids, the
        held part of every buffer, and the program's fingerprint, under a checksum.
        ``LLMProgram.load_session`` restores it."""
        with self._lock:
            self._live_state()
            write_session(self, path)

    # --- checks -------------------------------------------------------------------------------

    def _check_tokens(self, tokens: Tokens, call: str) -> list[int]:
        if isinstance(tokens, torch.Tensor):
            if (
                tokens.dim() != 1
                or tokens.dtype.is_floating_point
                or tokens.dtype.is_complex
                or tokens.dtype == torch.bool
            ):
                raise TypeError(
                    f"{call}: a tensor of token ids must be 1-D and integer, got "
                    f"{tokens.dtype} {list(tokens.shape)}"
                )
            ids = [int(t) for t in tokens.tolist()]
        elif isinstance(tokens, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"{call}: token ids are a list of ints or a 1-D tensor, not text/bytes")
        else:
            ids = []
            for i, t in enumerate(tokens):
                if isinstance(t, bool) or not isinstance(t, int):
                    raise TypeError(f"{call}: token {i} is {t!r}, not an int")
                ids.append(int(t))
        if not ids:
            raise ValueError(f"{call}: no tokens given")
        vocab = self.model.vocab_size
        for i, t in enumerate(ids):
            if not 0 <= t < vocab:
                raise ValueError(f"{call}: token {i} is {t}, outside the vocabulary [0, {vocab})")
        return ids

    def _check_room(self, count: int, call: str) -> None:
        room = self._layout.capacity - self.position
        if count > room:
            raise ValueError(
                f"{call}: {count} tokens do not fit: the session holds {self.position} of "
                f"{self._layout.capacity} positions (max_context_len), so {room} more fit; "
                "rewind or start a new session"
            )
