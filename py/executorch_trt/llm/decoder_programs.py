"""A causal LM with a static KV cache as ``torch.export`` programs in ExecuTorch's LLM
conventions.

transformers' own export wrapper (``TorchExportableModuleForDecoderOnlyLM``: a ``StaticCache``,
or a hybrid one for sliding-window models, whose layers are registered as buffers
``key_cache_{i}``, ``value_cache_{i}``, ``cumulative_length_{i}``) is exported with
``strict=True`` as transformers does (``run_decompositions`` fails on the non-strict export of
this wrapper). Every method exported from ONE wrapper names the same buffers, so in one program
the methods share the cache.

* ``forward(input_ids[1, T] int64, cache_position[T] int64) -> logits[1, 1, vocab]`` (the last
  token's; ``logits[1, T, vocab]`` with ``generate_full_logits``) with
  ``T = Dim("T", min=1, max=max_seq_len)``: ExecuTorch's ``TextLLMRunner`` calls it for the
  prompt (T = prompt length, positions ``start..start+T-1``) and for every generated token
  (T = 1), passing positions of the length of the tokens because the method's second input is
  longer than 1.
* ``prefill`` (the same signature as ``forward``) and ``decode(input_ids[1, 1],
  cache_position[1])``: the two-method form the runner also runs (it uses ``prefill`` when the
  program has no ``forward``, and ``decode`` for the generated tokens).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch
from torch.export import Dim, ExportedProgram

from executorch_trt import quiet

#: Length of the example prompt the dynamic methods are traced with (not 0 or 1, which
#: torch.export would specialise on); clipped to max_seq_len.
_EXAMPLE_LEN = 5


@contextlib.contextmanager
def _static_cache_config(model: Any) -> Iterator[None]:
    """``model`` configured for transformers' static-cache export (use_cache on, the static
    cache implementation) for the duration; the caller's settings are restored after."""
    text_config = model.config.get_text_config()
    generation = model.generation_config
    saved = (text_config.use_cache, generation.use_cache, generation.cache_implementation)
    text_config.use_cache = True
    generation.use_cache = True
    generation.cache_implementation = "static"
    try:
        yield
    finally:
        text_config.use_cache, generation.use_cache, generation.cache_implementation = saved


@contextlib.contextmanager
def last_token_logits(model: Any) -> Iterator[None]:
    """``model``'s forward computing the logits of the last position only for the duration
    (transformers' ``logits_to_keep=1``: the LM head reads one hidden state, not T). ExecuTorch's
    LLM recipe does the same unless ``generate_full_logits``; a prompt's LM head is about a fifth
    of its prefill at 135M parameters. The instance's own ``forward`` is restored after."""
    own = vars(model).get("forward")
    model.forward = functools.partial(type(model).forward, model, logits_to_keep=1)
    try:
        yield
    finally:
        if own is None:
            del model.forward
        else:
            model.forward = own


def exportable_module(model: Any, max_context_len: int) -> torch.nn.Module:
    """transformers' export wrapper around ``model``'s decoder: a module whose
    ``forward(input_ids=[1, T], cache_position=[T])`` returns logits and updates a static cache
    of ``max_context_len`` positions (zeroed) held as its buffers. ``model`` is not changed."""
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    with _static_cache_config(model):
        wrapper = TorchExportableModuleForDecoderOnlyLM(
            model, batch_size=1, max_cache_len=max_context_len
        )
    # The inner module: the outer forward drops cache_position.
    return wrapper.model.eval()


def _export(module: torch.nn.Module, length: int, max_len: int | None) -> ExportedProgram:
    """``module`` exported for ``length`` tokens, or for any length in ``[1, max_len]``."""
    kwargs = {
        "input_ids": torch.zeros(1, length, dtype=torch.long),
        "cache_position": torch.arange(length, dtype=torch.long),
    }
    shapes = None
    if max_len is not None:
        t = Dim("T", min=1, max=max_len)
        shapes = {"input_ids": {1: t}, "cache_position": {0: t}}
    with torch.no_grad(), quiet.lowering():
        return torch.export.export(
            module, args=(), kwargs=kwargs, dynamic_shapes=shapes, strict=True
        )


def export_decoder_methods(
    model: Any,
    max_seq_len: int,
    max_context_len: int,
    prefill_decode: bool = False,
    *,
    generate_full_logits: bool = False,
) -> dict[str, ExportedProgram]:
    """``{method: ExportedProgram}`` of ``model`` over one static cache of ``max_context_len``
    positions: ``{"forward"}`` (tokens per call in ``[1, max_seq_len]``), or with
    ``prefill_decode`` ``{"prefill", "decode"}`` (prefill: ``[1, max_seq_len]`` tokens; decode:
    one). Each returns the last token's logits ``[1, 1, vocab]``, or with
    ``generate_full_logits`` every token's ``[1, T, vocab]`` (ExecuTorch's LLM recipe's option
    of that name). Needs ``2 <= max_seq_len <= max_context_len`` (``export_llm`` checks it)."""
    module = exportable_module(model, max_context_len)
    example = min(_EXAMPLE_LEN, max_seq_len)
    logits = contextlib.nullcontext() if generate_full_logits else last_token_logits(model)
    with logits:
        if not prefill_decode:
            return {"forward": _export(module, example, max_len=max_seq_len)}
        return {
            "prefill": _export(module, example, max_len=max_seq_len),
            "decode": _export(module, 1, max_len=None),
        }
