"""Which of a program's mutable buffers hold one entry per token position, and which do not.

A session's state is every mutable buffer of the program (``runtime.Program.new_state``). For
an LLM program with a static KV cache two kinds matter:

* **positional** buffers (the KV caches): one dimension has the cache's capacity
  (``max_context_len`` positions) and the entry at position ``p`` is written when the token at
  ``p`` is run, then only read by later tokens under the causal mask. Entries at positions a
  session does not hold are never read before they are written again, so keeping the first
  ``n`` positions keeps everything that matters, and ``rewind(n)`` needs no copy at all.
* **other** buffers: everything else, e.g. transformers' ``cumulative_length_i`` step counters
  (an int64 scalar per layer that says where the next token is written). They are small; a
  session keeps their value after each call it makes, so it can restore them exactly.

Rule: a buffer is positional when exactly one of its dimensions equals the capacity. When
several do (a cache whose head dimension equals the capacity: head_dim 64, 64 positions), the
shape cannot tell ``[B, H, S, D]`` from a transposed key cache ``[B, H, D, S]``, and guessing
wrong would make a fork or a saved session keep the wrong entries. So the program is asked
(``probe``): one token is run at position 0 on a fresh state, and the dimension along which it
wrote exactly one entry, at index 0, is the position's (``written_dim``). A buffer with no such
dimension, or one the probe cannot decide, is "other". Sliding-window caches smaller than the
capacity (a ring buffer) are therefore "other": a session can fork and save them but rewinds
them only to a call boundary (``Session.rewind``). ``extension/llm/state_layout.h`` applies the
same rule in C++.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import torch

from executorch_trt.runtime.tensors import TensorSpec


@dataclasses.dataclass(frozen=True)
class StateLayout:
    """The buffers of one program, classified (module docstring).

    * ``capacity``: positions of the KV cache (``max_context_len``).
    * ``positional``: ``{buffer name: the dimension indexed by position}``.
    * ``other``: names of the other buffers, in the program's order.
    * ``specs``: every buffer's dtype and shape, in the program's order.
    """

    capacity: int
    positional: dict[str, int]
    other: tuple[str, ...]
    specs: dict[str, TensorSpec]

    @staticmethod
    def of(
        specs: Mapping[str, TensorSpec],
        capacity: int,
        probe: Callable[[Mapping[str, Sequence[int]]], Mapping[str, int]] | None = None,
    ) -> StateLayout:
        """Classifies ``specs`` (``{name: TensorSpec}``, ``Program.buffer_spec`` of each
        buffer) for a cache of ``capacity`` positions. A buffer with several dimensions of
        ``capacity`` is positional along the one ``probe`` returns for it (``probe`` gets
        ``{name: those dimensions}`` and returns ``{name: dimension}`` for the buffers it could
        decide); without ``probe``, or where it returns none, it is "other" (module
        docstring)."""
        positional: dict[str, int] = {}
        ambiguous: dict[str, list[int]] = {}
        for name, spec in specs.items():
            dims = [d for d, size in enumerate(spec.shape) if size == capacity]
            if len(dims) == 1:
                positional[name] = dims[0]
            elif dims:
                ambiguous[name] = dims
        if ambiguous and probe is not None:
            decided = probe(ambiguous)
            positional.update(
                (n, d) for n, d in decided.items() if n in ambiguous and d in ambiguous[n]
            )
        other = tuple(name for name in specs if name not in positional)
        return StateLayout(
            capacity, {n: positional[n] for n in specs if n in positional}, other, dict(specs)
        )

    def held(self, name: str, tensor: torch.Tensor, positions: int) -> torch.Tensor:
        """The part of buffer ``name`` (``tensor``) that ``positions`` held tokens use: the
        first ``positions`` entries along its position dimension for a positional buffer (a
        view), the whole tensor otherwise."""
        dim = self.positional.get(name)
        return tensor if dim is None else tensor.narrow(dim, 0, positions)

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
        and not tensor.dtype.is_floating_point
        and tensor.dtype != torch.bool
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
