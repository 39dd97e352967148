"""Small models for the executorch_trt tests (seeded, CPU, float32).

* ``TinyDecoder``: a Llama-shaped decoder (RMSNorm, RoPE, grouped SDPA attention, SiLU MLP) with
  static KV caches written by ``index_copy_`` (the HF ``StaticCache`` idiom), a step counter
  (int64, ``add_``) and a recurrent state (float, written by ordinary ops). Non-zero initial
  values for the counter and the state let a test tell "initialised" from "uninitialised".
* ``methods(decoder)``: ``prefill``/``decode``/``read_state`` wrappers with identical buffer
  FQNs, so methods exported together share state.
* ``ReorderedKV``: the seam-test model; its delegate argument order (first use inside the
  partition) differs from the method's input order, and it returns a user output next to its
  cache update.
"""

from __future__ import annotations

import abc

import torch
import torch.nn.functional as F


class CacheModule(torch.nn.Module):
    """A test module with one mutable buffer ``cache``: ``initial()`` (zeros of ``SHAPE``
    unless a subclass says otherwise). Subclasses write ``forward``."""

    SHAPE: tuple[int, ...] = (8, 4)

    def initial(self) -> torch.Tensor:
        return torch.zeros(self.SHAPE)

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", self.initial())


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, max_seq: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = torch.nn.Linear(heads * self.head_dim, dim, bias=False)
        self.w1 = torch.nn.Linear(dim, 2 * dim, bias=False)
        self.w3 = torch.nn.Linear(dim, 2 * dim, bias=False)
        self.w2 = torch.nn.Linear(2 * dim, dim, bias=False)
        shape = (1, kv_heads, max_seq, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape))
        self.register_buffer("v_cache", torch.zeros(shape))

    @staticmethod
    def rope(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, h, pos, cos, sin, mask):
        b, t, _ = h.shape
        x = self.norm1(h)
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        rep = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(rep, dim=1)
        values = self.v_cache.repeat_interleave(rep, dim=1)
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        h = h + self.wo(attn.transpose(1, 2).reshape(b, t, -1))
        x = self.norm2(h)
        return h + self.w2(F.silu(self.w1(x)) * self.w3(x))


class TinyDecoder(torch.nn.Module):
    """``forward(tokens[1, T] int64, pos[T] int64) -> logits[1, T, vocab] float32``.

    State: ``layers.{i}.k_cache``/``v_cache`` ``[1, kv_heads, max_seq, head_dim]`` (zeros),
    ``steps`` ``[1]`` int64 (starts at 7, +1 per call), ``state`` ``[1, dim]`` float32 (starts at
    0.25, ``state = 0.5 * state + mean(h)``).
    """

    def __init__(
        self,
        vocab: int = 64,
        dim: int = 32,
        heads: int = 4,
        kv_heads: int = 2,
        layers: int = 2,
        max_seq: int = 16,
        seed: int = 0,
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.max_seq, self.head_dim = max_seq, dim // heads
        self.embed = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(
            Block(dim, heads, kv_heads, max_seq) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("steps", torch.tensor([7], dtype=torch.int64))
        self.register_buffer("state", torch.full((1, dim), 0.25))

    def forward(self, tokens, pos):
        h = self.embed(tokens)
        freqs = pos.to(torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.arange(self.max_seq)[None, :] <= pos[:, None]
        for layer in self.layers:
            h = layer(h, pos, cos, sin, mask)
        self.steps.add_(1)
        self.state.copy_(0.5 * self.state + h.mean(1))
        return self.lm_head(self.norm(h))

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """All mutable state by FQN, in ``ReadState`` output order."""
        out = {}
        for i, layer in enumerate(self.layers):
            out[f"layers.{i}.k_cache"] = layer.k_cache
            out[f"layers.{i}.v_cache"] = layer.v_cache
        out["steps"] = self.steps
        out["state"] = self.state
        return out


class Step(torch.nn.Module):
    """``forward(tokens, pos)`` of the wrapped decoder (prefill or decode)."""

    def __init__(self, m: TinyDecoder) -> None:
        super().__init__()
        self.m = m

    def forward(self, tokens, pos):
        return self.m(tokens, pos)


class ReadState(torch.nn.Module):
    """``forward(scale[1]) -> every state tensor * scale`` (``TinyDecoder.state_tensors``
    order), for reading shared state back from a loaded program."""

    def __init__(self, m: TinyDecoder) -> None:
        super().__init__()
        self.m = m

    def forward(self, scale):
        return tuple(t * scale.to(t.dtype) for t in self.m.state_tensors().values())


def export_methods(
    decoder: TinyDecoder, prompt_len: int = 4
) -> dict[str, torch.export.ExportedProgram]:
    """``{"prefill", "decode", "read_state"}`` exported from one decoder (shared FQNs)."""
    with torch.no_grad():
        return {
            "prefill": torch.export.export(
                Step(decoder),
                (torch.zeros(1, prompt_len, dtype=torch.long), torch.arange(prompt_len)),
            ),
            "decode": torch.export.export(
                Step(decoder), (torch.zeros(1, 1, dtype=torch.long), torch.tensor([prompt_len]))
            ),
            "read_state": torch.export.export(ReadState(decoder), (torch.ones(1),)),
        }


def export_dynamic_prefill(
    decoder: TinyDecoder, example_len: int = 3
) -> dict[str, torch.export.ExportedProgram]:
    """``{"prefill", "decode", "read_state"}`` like ``export_methods``, but ``prefill`` takes
    any prompt length ``T`` in ``[1, decoder.max_seq]`` (``torch.export.Dim``; ``tokens[1, T]``
    and ``pos[T]`` share it), exported at ``example_len``."""
    length = torch.export.Dim("T", min=1, max=decoder.max_seq)
    with torch.no_grad():
        return {
            "prefill": torch.export.export(
                Step(decoder),
                (torch.zeros(1, example_len, dtype=torch.long), torch.arange(example_len)),
                dynamic_shapes={"tokens": {1: length}, "pos": {0: length}},
            ),
            "decode": torch.export.export(
                Step(decoder), (torch.zeros(1, 1, dtype=torch.long), torch.tensor([example_len]))
            ),
            "read_state": torch.export.export(ReadState(decoder), (torch.ones(1),)),
        }


class ReorderedKV(torch.nn.Module):
    """``forward(pos[1] int64, x[1, 1, 4]) -> (k_cache * 2).sum(-1)`` ``[1, 6]`` after
    ``k_cache[:, pos] = proj(x)``. Inside the partition ``x`` is used first, then the cache,
    then ``pos``: delegate argument order ``(x, b_k_cache, pos)`` differs from the method's
    ``(pos, x)``. The delegate returns the cache update and a user output."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("k_cache", torch.zeros(1, 6, 4))
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, pos, x):
        k = self.proj(x)
        self.k_cache.index_copy_(1, pos, k)
        return (self.k_cache * 2).sum(-1)

    @staticmethod
    def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([2]), torch.randn(1, 1, 4)


def export_reordered_kv() -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(ReorderedKV(), ReorderedKV.example_inputs())


class CacheReadOutside(torch.nn.Module):
    """``forward(idx[1], v[1, 2]) -> (flip(old cache), new cache * 3)``: ``flip`` is not a
    delegated op, so the cache buffer is read both outside and inside the partition; the
    delegate must not update it in place (the flip must see the old value). ExecuTorch happens
    to schedule the flip first here, so execution checks correctness while the lowering test
    checks the no-alias decision itself."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.arange(8, dtype=torch.float32).view(4, 2))

    def forward(self, idx, v):
        old = torch.flip(self.cache, [0])
        self.cache.index_copy_(0, idx, v)
        return old, self.cache * 3


def export_cache_read_outside() -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(CacheReadOutside(), (torch.tensor([1]), torch.ones(1, 2)))


class LinearThenForm(torch.nn.Module, abc.ABC):
    """``x[..., 16] -> form_of(linear(x))``: a seeded ``Linear(16, 16)`` followed by whatever a
    subclass's ``form_of`` does with ``self.form`` (one model per form a pass rewrites or leaves
    alone)."""

    def __init__(self, form: str):
        super().__init__()
        torch.manual_seed(0)
        self.form = form
        self.linear = torch.nn.Linear(16, 16)

    @abc.abstractmethod
    def form_of(self, y: torch.Tensor) -> torch.Tensor:
        """The model's result from the linear's ``y``, as ``self.form`` says."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.form_of(self.linear(x))
