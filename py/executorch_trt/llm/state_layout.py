"""Which of a program's mutable buffers hold one entry per token position, and which do not.

A session's state is every mutable buffer of the program (``runtime.Program.new_state``). For
an LLM program with a static KV cache two kinds matter:

* **positional** buffers (the KV caches): one dimension has the cache's capacity
  (``max_context_len`` positions) and the entry at position ``p`` is written when the token at
  ``p`` is run. A session keeps the entries at positions it does not hold at their initial
  values, so keeping the first ``n`` positions keeps everything that matters, and
  ``rewind(n)`` copies no held entry (it resets the dropped ones).
* **other** buffers: everything else, e.g. transformers' ``cumulative_length_i`` step counters
  (an int64 scalar per layer that says where the next token is written). They are small; a
  session keeps their value after each call it makes, so it can restore them exactly.

The shape alone cannot say which buffers are positional: a key cache stored transposed
(``[B, H, D, S]`` with ``D == S``), a table indexed by token id whose size equals the capacity, a
ring buffer written from its end, a per-position counter (``index_add_``) all have a dimension
of the capacity, and treating them as KV caches makes forks, saved sessions and rewinds keep
the wrong entries. So the program is asked (``StateProbe``): on a fresh state, the decode method
runs token 2 at position 0, token 3 at position 1, then token 3 at position 1 again (ids that
are not their positions, so a write indexed by token id is not taken for one indexed by
position). A buffer is positional along dimension ``d`` (of the capacity) when the first token
changed entries at index 0 only and the second at index 1 only along ``d`` and along no other
such dimension (``written_dim``), and the repeated token changed nothing, as a rewind that runs a
position again expects (an accumulating write changes it again). Everything else is "other". A
sliding-window cache smaller than the capacity (a ring buffer) is therefore "other": a session
can fork and save it but rewinds it only to a call boundary (``Session.rewind``).

An "other" buffer is a token **counter** when it is an integer scalar that held 0, 1 and 2 before
and after the first two probe tokens (``StateProbe.counters``): a rewind sets it to the kept count
instead of restoring a snapshot. A scalar that counts something else (a sum of token ids) is not
one. ``extension/llm/state_layout.h`` applies the same rules in C++.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import torch

from executorch_trt.runtime.tensors import TensorSpec


@dataclasses.dataclass(frozen=True)
class StateLayout:
    """The buffers of one program, classified (module docstring).

    * ``capacity``: positions of the KV cache (``max_context_len``).
    * ``positional``: ``{buffer name: the dimension indexed by position}``.
    * ``other``: names of the other buffers, in the program's order.
    * ``counters``: the other buffers that are token counters.
    * ``specs``: every buffer's dtype and shape, in the program's order.
    """

    capacity: int
    positional: dict[str, int]
    other: tuple[str, ...]
    counters: frozenset[str]
    specs: dict[str, TensorSpec]

    @staticmethod
    def of(
        specs: Mapping[str, TensorSpec],
        capacity: int,
        positional: Mapping[str, int],
        counters: Iterable[str] = (),
    ) -> StateLayout:
        """The layout of buffers ``specs`` (``{name: TensorSpec}``, ``Program.buffer_spec`` of
        each) for a cache of ``capacity`` positions, with the roles a ``StateProbe`` found:
        ``positional`` (``{name: dimension}``; a dimension that is not of ``capacity`` is
        ignored) and ``counters`` (names; only integer scalars that are not positional count).
        """
        kept = {
            n: d
            for n, d in positional.items()
            if n in specs and 0 <= d < len(specs[n].shape) and specs[n].shape[d] == capacity
        }
        other = tuple(name for name in specs if name not in kept)
        counting = frozenset(n for n in counters if n in other and _is_integer_scalar(specs[n]))
        return StateLayout(
            capacity, {n: kept[n] for n in specs if n in kept}, other, counting, dict(specs)
        )

    def held(self, name: str, tensor: torch.Tensor, positions: int) -> torch.Tensor:
        """The part of buffer ``name`` (``tensor``) that ``positions`` held tokens use: the
        first ``positions`` entries along its position dimension for a positional buffer (a
        view), the whole tensor otherwise."""
        dim = self.positional.get(name)
        return tensor if dim is None else tensor.narrow(dim, 0, positions)

    def dropped(self, name: str, tensor: torch.Tensor, start: int, end: int) -> torch.Tensor:
        """The entries of positional buffer ``name`` (``tensor``) at positions ``start`` to
        ``end - 1`` (a view): what a rewind from ``end`` tokens to ``start`` resets."""
        return tensor.narrow(self.positional[name], start, end - start)

    def held_bytes(self, positions: int) -> int:
        """Bytes of state that ``positions`` held tokens use (what a fork copies)."""
        total = 0
        for name, spec in self.specs.items():
            numel = 1
            for d, size in enumerate(spec.shape):
                numel *= positions if self.positional.get(name) == d else size
            total += numel * torch.empty((), dtype=spec.dtype).element_size()
        return total


def is_token_count(tensor: torch.Tensor, count: int) -> bool:
    """Whether ``tensor`` is an integer scalar holding ``count``: a buffer a rewind can set to
    the kept token count instead of restoring it (a step counter such as transformers'
    ``cumulative_length``)."""
    return (
        tensor.numel() == 1
        and tensor.dtype in _COUNTER_DTYPES
        and int(tensor.reshape(-1)[0]) == count
    )


def written_dim(
    before: torch.Tensor, after: torch.Tensor, dims: Sequence[int], position: int = 0
) -> int | None:
    """The one dimension of ``dims`` along which the entries that changed from ``before`` to
    ``after`` (a buffer's value before and after one token ran at ``position``) all have index
    ``position``, or ``None`` when no dimension or more than one does (nothing changed, a write
    the shape does not place, or one at another index: a ring buffer, a sink slot, which keeping
    the first ``n`` entries would get wrong). A KV cache written for one token changes one entry
    along its position dimension and many along the others. Entries are compared bit for
    bit."""
    # Bit for bit, as the C++ twin compares: each entry's bytes.
    size = before.element_size()
    raw = [t.reshape(-1).view(torch.uint8).reshape(*t.shape, size) for t in (before, after)]
    changed = (raw[0] != raw[1]).any(dim=-1)
    single = []
    for d in dims:
        others = [o for o in range(changed.dim()) if o != d]
        along = changed.any(dim=others) if others else changed
        if int(along.sum()) == 1 and bool(along[position]):
            single.append(d)
    return single[0] if len(single) == 1 else None


#: The dtypes a token counter may have (as ``IntegerScalarValue`` in C++).
_COUNTER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _is_integer_scalar(spec: TensorSpec) -> bool:
    """Whether a buffer of ``spec`` is one element of a ``_COUNTER_DTYPES`` dtype (as
    ``is_token_count`` asks of a value)."""
    return all(size == 1 for size in spec.shape) and spec.dtype in _COUNTER_DTYPES


class StateProbe:
    """Finds the roles of a program's buffers from what the probe tokens write (module
    docstring). The caller runs ``ids[k]`` (one of ``token_sets(vocab_size)``) at
    ``POSITIONS[k]`` through the decode method on one fresh state, in order, calling
    ``prepare`` before and ``observe`` after each. A buffer a probe token left unchanged
    (``silent``: an id whose embedding row is zero, such as a padding id, writes zeros into a
    zero cache) is decided by the next token set that changes it (``LLMProgram``).

    Before the repeated token, ``prepare`` rewinds the state to one token as a session would if
    the buffers that look positional so far are: they are left as they are, every other buffer
    gets its value after the first token back (which sets a token counter to 1). The probe keeps
    one copy of each buffer: at most one state's worth of memory.
    """

    #: Positions of the probe tokens: 0, 1, then 1 again (the rewrite a rewind leads to).
    POSITIONS = (0, 1, 1)

    @staticmethod
    def token_sets(vocab_size: int) -> list[tuple[int, int, int]]:
        """The ids to run at ``POSITIONS``, in the order to try them: ``(a, a + 1, a + 1)``
        for ``a`` = 2, the middle of the vocabulary and its end (ids unequal to their
        positions, below ``vocab_size``). A vocabulary of fewer than 4 ids has one set,
        its ids capped at the last one."""
        if vocab_size < 4:
            a, b = min(2, vocab_size - 1), min(3, vocab_size - 1)
            return [(a, b, b)]
        sets: list[tuple[int, int, int]] = []
        for a in (2, vocab_size // 2, vocab_size - 2):
            if (a, a + 1, a + 1) not in sets:
                sets.append((a, a + 1, a + 1))
        return sets

    def __init__(self, specs: Mapping[str, TensorSpec], capacity: int) -> None:
        """``specs`` as ``StateLayout.of`` takes them."""
        self._dims = {
            n: [d for d, size in enumerate(spec.shape) if size == capacity]
            for n, spec in specs.items()
        }
        self._scalars = {n for n, spec in specs.items() if _is_integer_scalar(spec)}
        #: Per buffer, its value after the last token observed (after the second token: kept
        #: only for the candidates; the others keep their value after the first, to restore).
        self._last: dict[str, torch.Tensor] = {}
        #: Per buffer: the dimension each of the first two tokens wrote at its position.
        self._written: dict[str, list[int | None]] = {n: [] for n in specs}
        self._rewritten: set[str] = set()
        self._silent: set[str] = set()
        self._values: dict[str, list[int]] = {n: [] for n in self._scalars}
        self._steps = 0

    def prepare(self, state: Mapping[str, torch.Tensor]) -> None:
        """Call before running the next probe token on ``state`` (``{name: tensor}``): records
        the fresh values before the first, rewinds the non-candidates before the repeat."""
        if self._steps == 0:
            for name in self._scalars:
                self._values[name].append(int(state[name].reshape(-1)[0]))
            self._last = {name: tensor.clone() for name, tensor in state.items()}
        elif self._steps == 2:
            for name, tensor in state.items():
                if name not in self._candidates():
                    tensor.copy_(self._last[name])

    def observe(self, state: Mapping[str, torch.Tensor]) -> None:
        """Records what the probe token just run (the next of ``POSITIONS``) wrote to
        ``state``. ``ValueError`` after ``len(POSITIONS)`` calls."""
        if self._steps >= len(self.POSITIONS):
            raise ValueError(f"StateProbe: only {len(self.POSITIONS)} probe tokens are run")
        position = self.POSITIONS[self._steps]
        for name, after in state.items():
            if self._steps < 2:
                dims = self._dims[name]
                self._written[name].append(
                    written_dim(self._last[name], after, dims, position) if dims else None
                )
                if dims and torch.equal(_bits(self._last[name]), _bits(after)):
                    self._silent.add(name)
            elif name in self._candidates() and not torch.equal(
                _bits(self._last[name]), _bits(after)
            ):
                self._rewritten.add(name)
            if name in self._values and self._steps < 2:
                self._values[name].append(int(after.reshape(-1)[0]))
            if self._steps == 0 or name in self._candidates():
                self._last[name] = after.clone()
        self._steps += 1

    def positional(self) -> dict[str, int]:
        """``{name: dimension}`` of the buffers the probe found positional (module
        docstring). ``ValueError`` before every probe token was observed."""
        self._check_done()
        found = {}
        for name in self._candidates() - self._rewritten:
            dim = self._written[name][0]
            if dim is not None:
                found[name] = dim
        return found

    def silent(self) -> set[str]:
        """Names of the buffers with a dimension of the capacity that one of the first two
        probe tokens left unchanged: the probe could not decide them."""
        self._check_done()
        return set(self._silent)

    def counters(self) -> set[str]:
        """Names of the integer scalars that held 0, 1, 2 before and after the first two
        probe tokens: token counters."""
        self._check_done()
        return {n for n, values in self._values.items() if values == [0, 1, 2]}

    def _candidates(self) -> set[str]:
        """Buffers the first two tokens wrote at their positions along one dimension."""
        return {
            n
            for n, written in self._written.items()
            if len(written) == 2 and written[0] is not None and written[0] == written[1]
        }

    def _check_done(self) -> None:
        if self._steps != len(self.POSITIONS):
            raise ValueError(
                f"StateProbe: {self._steps} of {len(self.POSITIONS)} probe tokens observed"
            )


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s bytes (so -0.0 differs from 0.0 and NaN equals itself)."""
    return tensor.reshape(-1).view(torch.uint8)
