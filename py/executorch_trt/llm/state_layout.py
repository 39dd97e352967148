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
several do and the last is one of them, the last is taken for the head dimension, which every
KV cache layout that transformers and ExecuTorch's LLM export write keeps last (``[B, H, S, D]``,
``[B, S, H, D]``), so a cache whose head dimension equals the capacity (head_dim 64, 64
positions) is still positional along ``S``. A buffer with no such dimension, or several that
rule leaves, is "other". Sliding-window caches smaller than the capacity (a ring buffer) are
therefore "other": a session can fork and save them but rewinds them only to a call boundary
(``Session.rewind``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

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
    def of(specs: Mapping[str, TensorSpec], capacity: int) -> StateLayout:
        """Classifies ``specs`` (``{name: TensorSpec}``, ``Program.buffer_spec`` of each
        buffer) for a cache of ``capacity`` positions."""
        positional: dict[str, int] = {}
        other = []
        for name, spec in specs.items():
            dims = [d for d, size in enumerate(spec.shape) if size == capacity]
            if len(dims) > 1 and dims[-1] == len(spec.shape) - 1:
                dims.pop()  # the head dimension (module docstring)
            if len(dims) == 1:
                positional[name] = dims[0]
            else:
                other.append(name)
        return StateLayout(capacity, positional, tuple(other), dict(specs))

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
