"""A small attention model with two KV caches, for the caller-owned state tests.

``TinyAttention``: an embedding, three ``Linear(8, 8)`` (q, k, v), two ``[1, 32, 8]`` caches
``k_cache``/``v_cache`` written by ``index_copy_`` and a masked SDPA over them:
``forward(tokens int64 [1, 1], pos int64 [1]) -> float32 [1, 1, 8]``. The model of the
two-thread first-execute deadlock (the Python runtime's log redirect).
"""

from __future__ import annotations

import functools
import os

import torch

import executorch_trt

CACHE_LEN = 32
WIDTH = 8
VOCAB = 16


class TinyAttention(torch.nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.q = torch.nn.Linear(WIDTH, WIDTH)
        self.k = torch.nn.Linear(WIDTH, WIDTH)
        self.v = torch.nn.Linear(WIDTH, WIDTH)
        self.register_buffer("k_cache", torch.zeros(1, CACHE_LEN, WIDTH))
        self.register_buffer("v_cache", torch.zeros(1, CACHE_LEN, WIDTH))

    def forward(self, tokens, pos):
        x = self.embed(tokens)  # [1, 1, 8]
        self.k_cache.index_copy_(1, pos, self.k(x))
        self.v_cache.index_copy_(1, pos, self.v(x))
        mask = (torch.arange(CACHE_LEN) <= pos).view(1, 1, CACHE_LEN)
        return torch.nn.functional.scaled_dot_product_attention(
            self.q(x), self.k_cache, self.v_cache, attn_mask=mask
        )


def example_inputs():
    return torch.tensor([[1]]), torch.tensor([0])


def step_inputs(token: int, pos: int):
    return [torch.tensor([[token]]), torch.tensor([pos])]


@functools.cache
def tiny_attention_pte(**options) -> bytes:
    """The ``.pte`` of ``TinyAttention(seed=0)`` through ``executorch_trt.export(**options)``
    with buffer names unless ``options`` say otherwise (cached per options)."""
    options.setdefault("emit_mutable_buffer_names", True)
    with torch.no_grad():
        ep = torch.export.export(TinyAttention().eval(), example_inputs())
        return executorch_trt.export(ep, **options).buffer


def write_tiny_attention_pte(directory: str) -> str:
    """Writes ``tiny_attention_pte()`` to ``directory/tiny_attention.pte``; returns its path."""
    path = os.path.join(directory, "tiny_attention.pte")
    with open(path, "wb") as f:
        f.write(tiny_attention_pte())
    return path


def eager_steps(model: TinyAttention, tokens, start: int = 0):
    """Runs ``model`` eagerly on ``tokens`` at positions ``start, start + 1, ...``; returns the
    outputs."""
    outs = []
    with torch.no_grad():
        for i, token in enumerate(tokens):
            outs.append(model(*step_inputs(token, start + i)))
    return outs
