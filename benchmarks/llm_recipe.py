"""ExecuTorch's CPU LLM recipe, built the way its `export_llm` builds it, from the benchmark's
seeded transformers model.

ExecuTorch 1.5.1's wheel ships the recipe as `executorch.examples.models.llama.export_llama_lib`:
`_export_llama(LlmConfig)` constructs ExecuTorch's own Llama transformer from a Meta-format
checkpoint (`.pth`) and a params JSON, with `use_kv_cache` and `use_sdpa_with_kv_cache` (the
caches are updated by `llama::update_cache` and attention runs in `llama::custom_sdpa`, reading
only the positions written so far), lowers it with XNNPACK (`extended_ops`: every op XNNPACK
takes, not only the dynamically quantized linears) and writes one method,
`forward(tokens[1, T] int64, input_pos[1] int64) -> logits[1, vocab] float32` (the last
position's logits), `T` dynamic in `[1, max_seq_length - 1]`.

The checkpoint is the same seeded model's weights converted here (torchtune, which the recipe's
own converters use, is not installed): transformers' Llama keeps each head's rotary pairs as
two halves (`rotate_half`), Meta's layout interleaves them, so the q and k projections are
permuted (`hf_to_meta`); greedy tokens equal to eager's validate the conversion.
"""

from __future__ import annotations

import json
import logging
import os
import time

import torch

from benchmarks.bench_config import ModelDims

#: The recipe's ModelType for a Llama-architecture model with a params JSON of its own.
MODEL_CLASS = "llama3"
#: The recipe's runtime kernels: importing this registers `llama::custom_sdpa` and
#: `llama::update_cache` (and their out variants) with PyTorch and ExecuTorch's Python runtime.
CUSTOM_OPS_MODULE = "executorch.extension.llm.custom_ops.custom_ops"
#: The recipe's one method.
METHOD = "forward"


def params(dims: ModelDims, rms_norm_eps: float, rope_theta: float) -> dict:
    """The recipe's params JSON (ExecuTorch's `ModelArgs` fields) for `dims`, with the
    normalisation epsilon and RoPE base of the transformers config it mirrors."""
    return {
        "dim": dims.hidden_size,
        "hidden_dim": dims.intermediate_size,
        "n_heads": dims.num_attention_heads,
        "n_kv_heads": dims.num_key_value_heads,
        "n_layers": dims.num_hidden_layers,
        "vocab_size": dims.vocab_size,
        "norm_eps": rms_norm_eps,
        "rope_theta": rope_theta,
        "use_hf_rope": False,
    }


def _rotate_half_to_interleaved(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A q or k projection weight [n_heads * head_dim, dim] from transformers' layout (each
    head's rotary pairs as its first and second halves) to Meta's (pairs adjacent)."""
    rows, dim = w.shape
    head_dim = rows // n_heads
    return w.view(n_heads, 2, head_dim // 2, dim).transpose(1, 2).reshape(rows, dim)


def hf_to_meta(state: dict[str, torch.Tensor], dims: ModelDims) -> dict[str, torch.Tensor]:
    """transformers LlamaForCausalLM state dict -> the Meta-format state dict the recipe loads
    (same tensors, q/k permuted; `output.weight` is `lm_head.weight`, or the embedding table
    itself when the model ties them). Raises KeyError on a weight it does not expect."""
    layer_names = {
        "self_attn.q_proj": "attention.wq",
        "self_attn.k_proj": "attention.wk",
        "self_attn.v_proj": "attention.wv",
        "self_attn.o_proj": "attention.wo",
        "input_layernorm": "attention_norm",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "feed_forward.w1",
        "mlp.down_proj": "feed_forward.w2",
        "mlp.up_proj": "feed_forward.w3",
    }
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key == "model.embed_tokens.weight":
            out["tok_embeddings.weight"] = value
        elif key == "model.norm.weight":
            out["norm.weight"] = value
        elif key == "lm_head.weight":
            out["output.weight"] = value
        elif key.startswith("model.layers."):
            index, rest = key[len("model.layers.") :].split(".", 1)
            module, suffix = rest.rsplit(".", 1)
            value = {
                "self_attn.q_proj": lambda w: _rotate_half_to_interleaved(
                    w, dims.num_attention_heads
                ),
                "self_attn.k_proj": lambda w: _rotate_half_to_interleaved(
                    w, dims.num_key_value_heads
                ),
            }.get(module, lambda w: w)(value)
            out[f"layers.{index}.{layer_names[module]}.{suffix}"] = value
        else:
            raise KeyError(f"unexpected weight {key!r} in the transformers state dict")
    # Tied: one tensor, under both names (the recipe's output layer reads the table).
    out.setdefault("output.weight", out["tok_embeddings.weight"])
    return {k: v.contiguous() for k, v in out.items()}


def write_inputs(model, dims: ModelDims, directory: str) -> tuple[str, str]:
    """Writes the recipe's inputs for the transformers `model` into `directory`:
    (`checkpoint.pth`, `params.json`). The checkpoint's name avoids "int8"/"8da4w" (the recipe
    treats such names as already quantized)."""
    config = model.config
    # transformers 5 keeps the RoPE base in `rope_parameters`, earlier versions in `rope_theta`.
    rope = getattr(config, "rope_parameters", None) or {}
    rope_theta = rope.get("rope_theta", getattr(config, "rope_theta", None))
    checkpoint = os.path.join(directory, "checkpoint.pth")
    params_path = os.path.join(directory, "params.json")
    torch.save(hf_to_meta(model.state_dict(), dims), checkpoint)
    with open(params_path, "w") as f:
        json.dump(params(dims, config.rms_norm_eps, float(rope_theta)), f, indent=2)
    return checkpoint, params_path


def llm_config(
    checkpoint: str,
    params_path: str,
    max_context_len: int,
    max_tokens: int,
    out_path: str,
    group_size: int | None = None,
):
    """The recipe's `LlmConfig`: float32, KV cache with `llama::custom_sdpa`, XNNPACK with
    extended ops, a cache of `max_context_len` positions and up to `max_tokens` tokens per call
    (the recipe's `max_seq_length` is one more: its dynamic dimension ends one below it),
    written to `out_path`; with `group_size`, the linears quantized 8da4w in groups of that
    many input channels (`quantization.qmode`, HQQ scales as the recipe's default) and the
    embedding table int8 with a scale per row (`embedding_quantize="8,0"`)."""
    from executorch.extension.llm.export.config.llm_config import LlmConfig, ModelType

    cfg = LlmConfig()
    cfg.base.model_class = ModelType(MODEL_CLASS)
    cfg.base.checkpoint = checkpoint
    cfg.base.params = params_path
    cfg.model.use_kv_cache = True
    cfg.model.use_sdpa_with_kv_cache = True
    cfg.export.max_seq_length = min(max_tokens + 1, max_context_len)
    cfg.export.max_context_length = max_context_len
    cfg.export.output_dir = os.path.dirname(out_path)
    cfg.export.output_name = out_path
    cfg.backend.xnnpack.enabled = True
    cfg.backend.xnnpack.extended_ops = True
    if group_size is not None:
        cfg.quantization.qmode = "8da4w"
        cfg.quantization.group_size = group_size
        cfg.quantization.embedding_quantize = "8,0"
    return cfg


def export(
    model,
    dims: ModelDims,
    max_context_len: int,
    max_tokens: int,
    out_path: str,
    group_size: int | None = None,
) -> dict:
    """Builds the recipe's `.pte` at `out_path` from the transformers `model`, for a cache of
    `max_context_len` positions and up to `max_tokens` tokens per call (`group_size`: 8da4w,
    `llm_config`). Returns {"convert_s": converting and writing the checkpoint (s),
    "export_s": `_export_llama` (s)}."""
    start = time.perf_counter()
    checkpoint, params_path = write_inputs(model, dims, os.path.dirname(out_path))
    convert_s = time.perf_counter() - start
    level = logging.getLogger().level
    from executorch.examples.models.llama.export_llama_lib import _export_llama

    # Importing the recipe sets the root logger to INFO; keep ours.
    logging.getLogger().setLevel(level)
    start = time.perf_counter()
    _export_llama(
        llm_config(checkpoint, params_path, max_context_len, max_tokens, out_path, group_size)
    )
    logging.getLogger().setLevel(level)
    export_s = time.perf_counter() - start
    os.remove(checkpoint)
    return {"convert_s": convert_s, "export_s": export_s}


def load_forward(path: str):
    """The recipe program's `forward` method, loaded on ExecuTorch's Python runtime (its custom
    kernels registered first)."""
    import importlib

    importlib.import_module(CUSTOM_OPS_MODULE)
    from executorch.runtime import Runtime

    return Runtime.get().load_program(path).load_method(METHOD)
