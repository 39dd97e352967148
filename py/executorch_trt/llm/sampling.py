"""Choosing the next token from a step's logits: greedy, or sampled with temperature, top-k and
top-p (nucleus), as ``transformers``' ``generate`` applies them (temperature, then top-k, then
top-p, then a draw from the softmax)."""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How ``Session.generate`` picks tokens.

    * ``temperature``: ``0.0`` is greedy (the highest logit; the lowest id on a tie), else the
      logits are divided by it before the softmax (> 0).
    * ``top_k``: keep the ``k`` highest logits (``0``: all).
    * ``top_p``: keep the smallest set of highest-probability tokens whose probabilities sum to
      at least ``top_p`` (``1.0``: all); in ``(0, 1]``.
    * ``seed``: seeds the draws (``None``: torch's global generator); the same seed, logits and
      settings give the same tokens.

    Raises ``TypeError``/``ValueError`` naming the setting for a value of the wrong type or out
    of range."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"generate: {name} must be a number, got {value!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int):
            raise TypeError(f"generate: top_k must be an int, got {self.top_k!r}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int)
        ):
            raise TypeError(f"generate: seed must be an int or None, got {self.seed!r}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"generate: seed must be in [0, 2**63), got {self.seed}")
        if not self.temperature >= 0.0:
            raise ValueError(
                f"generate: temperature must be >= 0 (0 is greedy), got {self.temperature}"
            )
        if self.top_k < 0:
            raise ValueError(
                f"generate: top_k must be >= 0 (0 keeps every token), got {self.top_k}"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"generate: top_p must be in (0, 1], got {self.top_p}")

    def generator(self) -> torch.Generator | None:
        """A generator seeded with ``seed``, or None for torch's global one."""
        if self.seed is None:
            return None
        return torch.Generator().manual_seed(self.seed)


def next_token(
    logits: torch.Tensor, config: SamplingConfig, generator: torch.Generator | None = None
) -> int:
    """The next token id for ``logits`` (float, ``[V]``) under ``config``; ``generator`` (from
    ``config.generator()``, kept across the steps of one generation) makes draws repeatable."""
    if config.temperature == 0.0:
        return int(torch.argmax(logits))
    # Shifted so the highest is 0 (the softmax is the same) and in float64: a tiny temperature
    # then sends the others to -inf instead of every score to inf.
    scores = logits.to(torch.float64)
    scores = (scores - scores.max()) / config.temperature
    if 0 < config.top_k < scores.numel():
        kth = torch.topk(scores, config.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if config.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
        # Drop a token when the ones before it already reach top_p (the first always stays).
        drop = cumulative - torch.softmax(ordered, dim=-1) >= config.top_p
        scores = scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    probabilities = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probabilities, 1, generator=generator))
