"""Which ``transformers`` causal LMs ``export_llm`` exports, and the refusal of the others.

An architecture is supported when transformers' static-cache export wrapper
(``transformers.integrations.executorch.TorchExportableModuleForDecoderOnlyLM``) exports it with
a dynamic length and the delegate lowers it with its caches updated in place; each one listed
here is exported and run against eager PyTorch by the tests (tests/py/hf_matrix_test.py,
tests/py/llm_export_test.py).
"""

from __future__ import annotations

from typing import Any

#: ``config.model_type`` -> the causal-LM class ``from_pretrained`` builds for it.
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


class UnsupportedArchitectureError(ValueError):
    """A model (or checkpoint) whose architecture ``export_llm`` does not export."""


def supported_list() -> str:
    """``"LlamaForCausalLM (llama), Qwen2ForCausalLM (qwen2), ..."``: for messages."""
    return ", ".join(f"{cls} ({model_type})" for model_type, cls in SUPPORTED_ARCHITECTURES.items())


def _unsupported(what: str, why: str) -> UnsupportedArchitectureError:
    return UnsupportedArchitectureError(
        f"{what}: {why}. export_llm supports these causal LMs: {supported_list()}"
    )


def check_config(config: Any, where: str) -> str:
    """The supported class name for ``config`` (a ``transformers.PretrainedConfig``); raises
    ``UnsupportedArchitectureError`` naming its ``model_type`` / ``architectures`` and the
    supported list otherwise. ``where`` names the model or checkpoint in the message."""
    model_type: Any = getattr(config, "model_type", None)
    declared = list(getattr(config, "architectures", None) or [])
    expected = SUPPORTED_ARCHITECTURES.get(model_type)
    named = (
        f"{', '.join(declared)} (model_type {model_type!r})"
        if declared
        else (f"model_type {model_type!r}")
    )
    if expected is None:
        raise _unsupported(where, f"architecture {named} is not supported")
    if declared and expected not in declared:
        raise _unsupported(where, f"architecture {named} is not the causal LM {expected}")
    _check_rope(config, where)
    return expected


def _check_rope(config: Any, where: str) -> None:
    """Refuses dynamic-NTK rotary scaling: transformers recomputes its frequencies from the
    longest sequence seen so far, a data-dependent branch torch.export cannot capture."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if isinstance(rope, dict):
        rope_type = rope.get("rope_type", rope.get("type"))
        if rope_type == "dynamic":
            raise UnsupportedArchitectureError(
                f"{where}: rope_type 'dynamic' (dynamic NTK scaling) is not supported: its "
                "frequencies change with the longest sequence seen at run time, which an "
                "exported program cannot follow; use a model with static rope scaling (e.g. "
                "'linear', 'llama3') or none"
            )


def check_model(model: Any) -> str:
    """The class name of ``model`` (a ``transformers`` ``PreTrainedModel`` instance) when it is a
    supported causal LM; ``UnsupportedArchitectureError`` otherwise, naming its class, and
    ``TypeError`` for something that is not a transformers model at all."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "model_type"):
        raise TypeError(
            f"export_llm: expected a transformers causal LM (e.g. "
            f"AutoModelForCausalLM.from_pretrained(dir)) or a checkpoint directory, got "
            f"{type(model).__module__}.{type(model).__qualname__}"
        )
    name = type(model).__name__
    expected = SUPPORTED_ARCHITECTURES.get(config.model_type)
    if expected is None:
        raise _unsupported(
            f"export_llm: {name}", f"architecture model_type {config.model_type!r} is not supported"
        )
    if name != expected:
        raise _unsupported(
            f"export_llm: {name}",
            f"for model_type {config.model_type!r} only the causal LM {expected} is exported",
        )
    _check_rope(config, f"export_llm: {name}")
    return name
