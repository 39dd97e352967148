"""A Whisper-architecture model whose decoder keeps every K/V in caller-owned caches.

A Hugging Face `transformers` ``WhisperForConditionalGeneration`` (tiny config, seeded random
weights, no hub download) whose decoder attention is rewritten by a module swap
(``swap_decoder_attention``; transformers itself is not modified): in every decoder layer

* ``self_attn`` becomes a ``StaticSelfAttention``: static K/V caches ``key_cache`` /
  ``value_cache`` (float32 [1, H, max_len, D]) written in place at the step's cache positions
  (``index_copy_`` on dim 2, a form the delegate updates in place) and read through a mask
  that hides every position after the query's own;
* ``encoder_attn`` becomes a ``CondCrossAttention``: K and V are computed from the encoder
  hidden states under ``torch.cond`` with ExecuTorch's ``executorch::alias`` /
  ``executorch::update_cross_attn_cache`` (``docs/executorch_notes.md``, "``torch.cond`` and the
  cross-attention cache ops") and cached in zero-initialised buffers ``key_cache`` / ``value_cache``
  (float32 [1, H, encoder_len, D]): the first decoder call of an utterance computes them (predicate
  ``(key_cache != 0).any()`` is false), every later call reuses them.

Both reuse the transformers modules' own projections (``q_proj``, ``k_proj``, ``v_proj``,
``out_proj``: same parameters, same FQNs); only their forward is new. The rest (embeddings,
layer norms, MLPs, the encoder, ``proj_out``) is transformers' own code.

Three methods of one program (``export_methods``) share all caches by FQN, e.g.
``model.decoder.layers.0.self_attn.key_cache`` and
``model.decoder.layers.0.encoder_attn.key_cache``:

* ``encode(input_features float32 [1, mel_bins, 2 * source_positions])
  -> encoder_hidden_states float32 [1, source_positions, d_model]``
* ``prefill(decoder_input_ids int64 [1, P], cache_position int64 [P],
  encoder_hidden_states) -> logits float32 [1, P, vocab]``
* ``decode(decoder_input_ids int64 [1, 1], cache_position int64 [1],
  encoder_hidden_states) -> logits float32 [1, 1, vocab]``

A new utterance is the caller's act: zero the cross-attention caches (``cross_caches``), then
encode and prefill from position 0. The self-attention caches need no zeroing: each call
writes its positions before reading them and the mask hides every later position, so rows
left from the previous utterance are never read (``tests/py/whisper_cross_attn_test.py``
checks it against a fresh model).

Eager ``executorch::alias`` trips PyTorch's custom-op aliasing check, so the eager reference
runs the same modules with ``use_cond=False``: plain Python control flow that computes the
cross K/V once per utterance (``set_use_cond``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import executorch_trt.ops  # noqa: F401  (defines executorch::alias / update_cross_attn_cache)

# The tiny configuration: (mel bins, source positions, d_model, heads, layers, vocab,
# max target positions).
CONFIG = dict(
    vocab_size=96,
    num_mel_bins=8,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_source_positions=8,
    max_target_positions=32,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=3,
    suppress_tokens=None,
    begin_suppress_tokens=None,
    # Larger than transformers' 0.02, so that greedy tokens vary with the step and the
    # utterance (at 0.02 every step picks the same token).
    init_std=0.5,
)
# Whisper's forced decoder prefix (start-of-transcript, language, task, no-timestamps
# stand-ins): the prefill prompt.
PREFIX = (3, 4, 5, 6)

# Cross-attention variants: "cond" (the real one), "recompute_every_step" (the predicate is
# never true, so K/V are recomputed on every call: a program the runner must reject).
CROSS_VARIANTS = ("cond", "recompute_every_step")


def build_model(seed: int = 0, **config_overrides):
    """A seeded random ``WhisperForConditionalGeneration`` (float32, eval mode) with the tiny
    ``CONFIG`` (``config_overrides`` replace any ``WhisperConfig`` field). Deterministic:
    the same seed gives the same weights."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    fields = dict(CONFIG)
    fields.update(config_overrides)
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(**fields)).eval()
    return model


def encoder_len(config) -> int:
    """Encoder output positions: the conv stem halves the 2 * max_source_positions frames."""
    return config.max_source_positions


def input_features(config, seed: int) -> torch.Tensor:
    """Seeded random log-mel features, float32 [1, num_mel_bins, 2 * max_source_positions]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions, generator=g)


class _Projections(torch.nn.Module):
    """The q/k/v/out projections of a transformers ``WhisperAttention`` (the same modules, so
    the same parameters under the same names) and its head geometry."""

    def __init__(self, attn):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            attn.q_proj,
            attn.k_proj,
            attn.v_proj,
            attn.out_proj,
        )
        self.num_heads, self.head_dim, self.scaling = attn.num_heads, attn.head_dim, attn.scaling

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[1, T, H * D] -> [1, H, T, D] (contiguous)."""
        return (
            x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim)
            .transpose(1, 2)
            .contiguous()
        )

    def _query(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # Whisper scales the projected query (not the scores), as transformers does.
        return self._heads(self.q_proj(hidden_states) * self.scaling)

    def _attend(self, q, k, v, mask=None) -> torch.Tensor:
        """softmax(q k^T + mask) v with q [1, H, T, D], k/v [1, H, L, D], `mask` bool [T, L]
        (True = may attend) or None; returns out_proj of the heads merged, [1, T, H * D]."""
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        out = out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)
        return self.out_proj(out)


class StaticSelfAttention(_Projections):
    """Decoder self-attention over static caches written in place.

    Buffers ``key_cache`` / ``value_cache``: float32 [1, H, max_len, D], zeros. ``forward``
    writes the step's K/V at ``cache_position`` (``index_copy_`` on dim 2) and attends over
    the whole cache with query ``i`` seeing positions ``<= cache_position[i]``."""

    def __init__(self, attn, max_len: int):
        super().__init__(attn)
        shape = (1, self.num_heads, max_len, self.head_dim)
        self.register_buffer("key_cache", torch.zeros(shape))
        self.register_buffer("value_cache", torch.zeros(shape))

    def forward(self, hidden_states, cache_position=None, **unused):
        """``hidden_states`` float32 [1, T, d_model], ``cache_position`` int64 [T] (distinct,
        in [0, max_len); required) -> (float32 [1, T, d_model], None), the transformers
        attention's return shape. Raises ``ValueError`` without ``cache_position``."""
        if cache_position is None:
            raise ValueError("StaticSelfAttention needs cache_position (int64 [T])")
        q = self._query(hidden_states)
        self.key_cache.index_copy_(2, cache_position, self._heads(self.k_proj(hidden_states)))
        self.value_cache.index_copy_(2, cache_position, self._heads(self.v_proj(hidden_states)))
        positions = torch.arange(self.key_cache.shape[2], device=cache_position.device)
        mask = positions[None, :] <= cache_position[:, None]
        return self._attend(q, self.key_cache, self.value_cache, mask), None


class CondCrossAttention(_Projections):
    """Decoder cross-attention whose K/V are computed once per utterance under ``torch.cond``.

    Buffers ``key_cache`` / ``value_cache``: float32 [1, H, encoder_len, D], zeros (zero means
    "not computed yet": zero them to start a new utterance). With ``use_cond`` (export) the
    K/V come from ``torch.cond((key_cache != 0).any(), alias, update_cross_attn_cache)``; without
    it (the eager reference) from the same decision in Python. ``variant`` (``CROSS_VARIANTS``)
    "recompute_every_step" makes the predicate never true (a deliberately wasteful program)."""

    def __init__(self, attn, encoder_len: int, variant: str = "cond"):
        super().__init__(attn)
        if variant not in CROSS_VARIANTS:
            raise ValueError(f"variant must be one of {CROSS_VARIANTS}, got {variant!r}")
        shape = (1, self.num_heads, encoder_len, self.head_dim)
        self.register_buffer("key_cache", torch.zeros(shape))
        self.register_buffer("value_cache", torch.zeros(shape))
        self.variant = variant
        self.use_cond = True

    def _project(self, encoder_states):
        return self._heads(self.k_proj(encoder_states)), self._heads(self.v_proj(encoder_states))

    def _cached_kv(self, encoder_states) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.use_cond:  # the eager reference: the same decision, in Python
            if self.variant == "recompute_every_step" or not bool((self.key_cache != 0).any()):
                k, v = self._project(encoder_states)
                self.key_cache.copy_(k)
                self.value_cache.copy_(v)
            return self.key_cache, self.value_cache

        def reuse(k_cache, v_cache, enc):
            return torch.ops.executorch.alias(k_cache, v_cache)

        def recompute(k_cache, v_cache, enc):
            k, v = self._project(enc)
            return (
                torch.ops.executorch.update_cross_attn_cache(k, k_cache),
                torch.ops.executorch.update_cross_attn_cache(v, v_cache),
            )

        if self.variant == "recompute_every_step":
            computed = (self.key_cache != self.key_cache).any()  # never true
        else:
            computed = (self.key_cache != 0).any()
        k, v = torch.cond(
            computed, reuse, recompute, (self.key_cache, self.value_cache, encoder_states)
        )
        return k, v

    def forward(self, hidden_states, key_value_states=None, **unused):
        """``hidden_states`` float32 [1, T, d_model], ``key_value_states`` (the encoder hidden
        states) float32 [1, encoder_len, d_model] -> (float32 [1, T, d_model], None). Raises
        ``ValueError`` without ``key_value_states``."""
        if key_value_states is None:
            raise ValueError("CondCrossAttention needs key_value_states (the encoder states)")
        q = self._query(hidden_states)
        k, v = self._cached_kv(key_value_states)
        return self._attend(q, k, v), None


def swap_decoder_attention(model, max_len: int, cross_variant: str = "cond"):
    """Replaces every decoder layer's ``self_attn`` with a ``StaticSelfAttention`` (cache of
    ``max_len`` positions, at most ``config.max_target_positions``) and ``encoder_attn`` with a
    ``CondCrossAttention`` (``cross_variant``, see ``CROSS_VARIANTS``), reusing their
    projections. Modifies and returns ``model``. Raises ``ValueError`` for a ``max_len``
    outside [1, max_target_positions] or an unknown variant."""
    config = model.config
    if not 1 <= max_len <= config.max_target_positions:
        raise ValueError(f"max_len must be in [1, {config.max_target_positions}], got {max_len}")
    for layer in model.model.decoder.layers:
        layer.self_attn = StaticSelfAttention(layer.self_attn, max_len)
        layer.encoder_attn = CondCrossAttention(
            layer.encoder_attn, encoder_len(config), cross_variant
        )
    return model


def set_use_cond(model, use_cond: bool) -> None:
    """``use_cond=False`` for the eager reference (no ``torch.cond``), True to export."""
    for layer in model.model.decoder.layers:
        layer.encoder_attn.use_cond = use_cond


def self_caches(model) -> dict[str, torch.Tensor]:
    """The self-attention cache buffers by FQN (sorted)."""
    return {n: b for n, b in sorted(model.named_buffers()) if ".self_attn." in n}


def cross_caches(model) -> dict[str, torch.Tensor]:
    """The cross-attention cache buffers by FQN (sorted)."""
    return {n: b for n, b in sorted(model.named_buffers()) if ".encoder_attn." in n}


def zero_cross_caches(model) -> None:
    """Starts a new utterance (eager): zeroes every cross-attention cache in place."""
    for buf in cross_caches(model).values():
        buf.zero_()


class Encode(torch.nn.Module):
    """``forward(input_features float32 [1, mel_bins, 2 * source_positions]) ->
    encoder_hidden_states float32 [1, source_positions, d_model]``: transformers' encoder."""

    def __init__(self, model):
        super().__init__()
        self.encoder = model.model.encoder

    def forward(self, input_features):
        return self.encoder(input_features=input_features).last_hidden_state


class DecoderStep(torch.nn.Module):
    """``forward(decoder_input_ids int64 [1, T], cache_position int64 [T],
    encoder_hidden_states float32 [1, source_positions, d_model]) -> logits float32
    [1, T, vocab]``: transformers' decoder (its attention swapped) and ``proj_out``. The same
    instance serves prefill and decode, so both name the caches alike (``model.decoder...``)."""

    def __init__(self, model):
        super().__init__()
        self.model = model.model
        self.proj_out = model.proj_out

    def forward(self, decoder_input_ids, cache_position, encoder_hidden_states):
        hidden = self.model.decoder(
            input_ids=decoder_input_ids,
            encoder_hidden_states=encoder_hidden_states,
            position_ids=cache_position.unsqueeze(0),
            use_cache=False,
            cache_position=cache_position,
        ).last_hidden_state
        return self.proj_out(hidden)


def export_methods(model, prompt_len: int) -> dict[str, torch.export.ExportedProgram]:
    """``{"encode", "prefill", "decode": ExportedProgram}`` of a swapped ``model``
    (``swap_decoder_attention``), static shapes, prefill for ``prompt_len`` tokens. Call under
    ``torch.no_grad()``; the caches must be zero (fresh)."""
    config = model.config
    set_use_cond(model, True)
    features = input_features(config, 0)
    states = torch.zeros(1, encoder_len(config), config.d_model)
    step = DecoderStep(model).eval()
    return {
        "encode": torch.export.export(Encode(model).eval(), (features,), strict=False),
        "prefill": torch.export.export(
            step,
            (
                torch.zeros(1, prompt_len, dtype=torch.long),
                torch.arange(prompt_len, dtype=torch.long),
                states,
            ),
            strict=False,
        ),
        "decode": torch.export.export(
            step,
            (
                torch.zeros(1, 1, dtype=torch.long),
                torch.tensor([prompt_len], dtype=torch.long),
                states,
            ),
            strict=False,
        ),
    }


def greedy_reference(
    model, utterances: list[torch.Tensor], prompt: torch.Tensor, steps: int, on_step=None
) -> list[dict]:
    """Eager greedy decoding of each utterance in turn on one swapped ``model``
    (``use_cond=False``), the way the program is driven: zero the cross caches, encode,
    prefill ``prompt`` (int64 [1, P]) at positions 0..P-1, then ``steps`` single-token decode
    steps. The self caches are not zeroed between utterances. ``on_step(u, step, logits)``,
    if given, is called after each step with the full logits [1, T, vocab].

    Returns per utterance ``{"encoder_hidden_states": tensor, "steps": [{"step", "token",
    "logits" (last position, list of floats), "caches": {fqn: clone}}]}``."""
    set_use_cond(model, False)
    decoder = DecoderStep(model).eval()
    encode = Encode(model).eval()
    p = prompt.shape[1]
    out = []
    with torch.no_grad():
        for u, features in enumerate(utterances):
            zero_cross_caches(model)
            states = encode(features)
            records = []
            logits = decoder(prompt, torch.arange(p, dtype=torch.long), states)
            for step in range(steps + 1):
                if on_step is not None:
                    on_step(u, step, logits)
                last = logits[0, -1]
                token = int(torch.argmax(last))
                records.append(
                    {
                        "step": step,
                        "token": token,
                        "logits": last.clone(),
                        "caches": {
                            n: b.clone()
                            for n, b in {**self_caches(model), **cross_caches(model)}.items()
                        },
                    }
                )
                if step == steps:
                    break
                logits = decoder(
                    torch.tensor([[token]]), torch.tensor([p + step], dtype=torch.long), states
                )
            out.append({"encoder_hidden_states": states, "steps": records})
    return out


def cache_checksum(t: torch.Tensor) -> list:
    """[sum(x), sum(x * w), sum(|x|), sum(|x| * w)] in float64 with w = 1 + (flat index mod
    1021): the checksum of ``examples/decoder_model.py`` (and ``examples/reference.h``)."""
    from decoder_model import cache_checksum as checksum

    return checksum(t)
