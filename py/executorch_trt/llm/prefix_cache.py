"""``PrefixCache``: a program's cache of prompt states, keyed by token ids, that new sessions'
first ``prefill`` reuses (``LLMProgram.prefix_cache``).

After a session's ``prefill``, the cache keeps a copy of the session's state at that point: the
first ``position`` entries of each KV cache, the other buffers, and the last token's logits,
under the SHA-256 of the token ids held (content-addressed: equal prompts share one entry). A
new session's first ``prefill`` of ``tokens`` looks for the entry sharing the longest prefix
with ``tokens`` and copies that much state in instead of computing it:

* an entry whose tokens are all a prefix of ``tokens`` is taken whole (all of it when the two
  are equal: then the prefill runs nothing and returns the entry's logits);
* an entry that goes on past the shared prefix is taken up to it when the program's
  non-positional buffers are all token counters (which then hold the prefix's length); at
  least one token is then run, to compute the logits.

A KV cache entry depends only on the tokens up to its position, so the copied state is what
running the prefix gives. At most ``max_bytes`` of state are kept; the least recently used
entries go first, and an entry larger than ``max_bytes`` is not kept.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from executorch_trt.llm.state_layout import StateLayout

if TYPE_CHECKING:
    from executorch_trt.llm.session import Session


@dataclasses.dataclass(frozen=True)
class _Entry:
    tokens: tuple[int, ...]
    #: The held part of every buffer (``StateLayout.held``), copied.
    state: dict[str, torch.Tensor]
    logits: torch.Tensor
    counters: frozenset[str]
    snapshots: dict[int, dict[str, torch.Tensor]]
    nbytes: int


def _key(tokens: Sequence[int]) -> str:
    return hashlib.sha256(
        torch.tensor(list(tokens), dtype=torch.int64).numpy().tobytes()
    ).hexdigest()


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class PrefixCache:
    """Prompt states by token ids (module docstring). ``entries``, ``bytes`` (state kept),
    ``hits`` (prefills that reused at least one token) and ``reused_tokens`` (all tokens
    reused) describe it; ``clear()`` empties it. Thread-safe."""

    def __init__(self, layout: StateLayout, max_bytes: int) -> None:
        self._layout = layout
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.reused_tokens = 0

    @property
    def entries(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def store(self, session: Session) -> None:
        """Keeps ``session``'s state under its tokens (after its prefill)."""
        key = _key(session._tokens)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
        position = session.position
        state = {
            name: self._layout.held(name, tensor, position).clone()
            for name, tensor in session._live_state().items()
        }
        assert session._logits is not None
        snapshots = {
            p: {n: t.clone() for n, t in snap.items()}
            for p, snap in session._snapshots.items()
            if p <= position
        }
        nbytes = (
            sum(_nbytes(t) for t in state.values())
            + _nbytes(session._logits)
            + sum(_nbytes(t) for snap in snapshots.values() for t in snap.values())
        )
        if nbytes > self.max_bytes:
            return
        entry = _Entry(
            tuple(session._tokens),
            state,
            session._logits.clone(),
            frozenset(session._counters),
            snapshots,
            nbytes,
        )
        with self._lock:
            if key in self._entries:
                return
            while self._entries and self.bytes + nbytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.bytes -= evicted.nbytes
            self._entries[key] = entry
            self.bytes += nbytes

    def _best(self, ids: list[int]) -> tuple[_Entry | None, int]:
        """The entry to reuse for a prefill of ``ids`` and how many tokens of it (0: none)."""
        others = frozenset(self._layout.other)
        best: tuple[_Entry | None, int] = (None, 0)
        for entry in reversed(self._entries.values()):  # most recent first: wins ties
            shared = 0
            for a, b in zip(entry.tokens, ids):
                if a != b:
                    break
                shared += 1
            if shared == len(entry.tokens):
                usable = shared
            elif entry.counters == others:
                usable = min(shared, len(ids) - 1)
            else:
                usable = 0
            if usable > best[1]:
                best = (entry, usable)
        return best

    def restore(self, ids: list[int], session: Session) -> int:
        """Copies the longest reusable prefix of ``ids`` into empty ``session``; returns its
        length (0 when nothing is reused). The caller runs the rest."""
        with self._lock:
            entry, k = self._best(ids)
            if entry is None or k == 0:
                return 0
            self._entries.move_to_end(_key(entry.tokens))
            self.hits += 1
            self.reused_tokens += k
        state = session._live_state()
        whole = k == len(entry.tokens)
        for name, tensor in state.items():
            if name in self._layout.positional:
                self._layout.held(name, tensor, k).copy_(
                    self._layout.held(name, entry.state[name], k)
                )
            elif whole:
                tensor.copy_(entry.state[name])
            else:  # every other buffer is a token counter (_best)
                tensor.fill_(k)
        session._tokens = list(entry.tokens[:k])
        session._logits = entry.logits.clone() if whole else None
        session._counters = set(entry.counters)
        session._snapshots = {
            p: {n: t.clone() for n, t in snap.items()}
            for p, snap in entry.snapshots.items()
            if p <= k
        }
        session._record()
        return k
