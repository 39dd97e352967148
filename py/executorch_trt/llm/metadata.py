"""The metadata methods ExecuTorch's LLM runner reads from a program.

``TextLLMRunner`` (extension/llm/runner/llm_runner_helper.cpp: ``get_llm_metadata``,
``get_eos_ids``) executes these constant methods by name and reads each result as an integer
scalar (``EValue::toScalar().to<int64_t>()``; a bool reads as 0/1); ``get_eos_ids`` returns a
list of them. Missing ``get_max_seq_len`` is an error for the runner; the others have defaults
(``get_max_context_len`` = ``get_max_seq_len``, ``use_kv_cache`` true,
``enable_dynamic_shape`` false: without it the runner feeds the prompt one token at a time).
The runner takes BOS and the vocabulary size from its tokenizer; ``get_bos_id`` and
``get_vocab_size`` are there for other readers (e.g. a runner of another version).
"""

from __future__ import annotations

from typing import Any

MAX_SEQ_LEN = "get_max_seq_len"
MAX_CONTEXT_LEN = "get_max_context_len"
VOCAB_SIZE = "get_vocab_size"
BOS_ID = "get_bos_id"
EOS_IDS = "get_eos_ids"
USE_KV_CACHE = "use_kv_cache"
ENABLE_DYNAMIC_SHAPE = "enable_dynamic_shape"


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def eos_ids(model: Any) -> list[int]:
    """The end-of-sequence token ids of ``model``: its config's, then any further ones its
    generation config lists (instruct models end turns with extra tokens there), in order."""
    ids = _ids(getattr(model.config.get_text_config(), "eos_token_id", None))
    generation = getattr(model, "generation_config", None)
    for i in _ids(getattr(generation, "eos_token_id", None)):
        if i not in ids:
            ids.append(i)
    return ids


def bos_id(model: Any) -> int | None:
    """The beginning-of-sequence token id of ``model`` (config, else generation config), or
    None when it has none (e.g. Qwen)."""
    value = getattr(model.config.get_text_config(), "bos_token_id", None)
    if value is None:
        value = getattr(getattr(model, "generation_config", None), "bos_token_id", None)
    return None if value is None else int(value)


def llm_metadata(
    model: Any, max_seq_len: int, max_context_len: int, dynamic_shape: bool = True
) -> dict[str, Any]:
    """``{method name: value}`` for ``executorch_trt.export(..., constant_methods=...)``:
    ``get_max_seq_len`` (tokens per call), ``get_max_context_len`` (cache positions),
    ``get_vocab_size``, ``use_kv_cache`` (True), ``enable_dynamic_shape`` (``dynamic_shape``:
    one call takes the whole prompt), ``get_bos_id`` and ``get_eos_ids`` when the model has
    them (the runner falls back to its tokenizer's)."""
    methods: dict[str, Any] = {
        MAX_SEQ_LEN: int(max_seq_len),
        MAX_CONTEXT_LEN: int(max_context_len),
        VOCAB_SIZE: int(model.config.get_text_config().vocab_size),
        USE_KV_CACHE: True,
        ENABLE_DYNAMIC_SHAPE: bool(dynamic_shape),
    }
    bos = bos_id(model)
    if bos is not None:
        methods[BOS_ID] = bos
    eos = eos_ids(model)
    if eos:
        methods[EOS_IDS] = eos
    return methods
