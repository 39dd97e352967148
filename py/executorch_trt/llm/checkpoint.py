"""Loading a local ``transformers`` checkpoint directory for ``export_llm``, offline.

A checkpoint directory is what ``save_pretrained`` writes: ``config.json`` plus the weights as
safetensors (``model.safetensors``, or shards listed in ``model.safetensors.index.json``).
Nothing is downloaded (``local_files_only=True``). Each problem is named before the weights
are read: a missing directory, no ``config.json``, a config transformers cannot read, an
unsupported architecture (``architectures.check_config``), no safetensors weights.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import torch

from executorch_trt.llm.architectures import check_config


class CheckpointError(ValueError):
    """A checkpoint directory ``export_llm`` cannot load; the message names the problem."""


def _check_directory(model_dir: str) -> None:
    if not os.path.exists(model_dir):
        raise CheckpointError(
            f"model directory {model_dir} does not exist; pass the directory "
            "save_pretrained wrote (config.json + *.safetensors)"
        )
    if not os.path.isdir(model_dir):
        raise CheckpointError(
            f"model directory {model_dir} is a file, not a directory; pass the "
            "directory save_pretrained wrote (config.json + *.safetensors)"
        )
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise CheckpointError(
            f"model directory {model_dir} has no config.json; it is not a "
            "transformers checkpoint (save_pretrained writes config.json "
            "beside the weights)"
        )


def _check_weights(model_dir: str) -> None:
    if glob.glob(os.path.join(model_dir, "*.safetensors")):
        return
    other = sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir, "*.bin")))
    hint = (
        f"; it has {', '.join(other)}: convert them to safetensors "
        "(model.save_pretrained(dir) writes safetensors)"
        if other
        else ""
    )
    raise CheckpointError(f"model directory {model_dir} has no *.safetensors weights{hint}")


def read_config(model_dir: str) -> Any:
    """The ``transformers.PretrainedConfig`` of ``model_dir``, after the directory checks and
    the architecture check. Raises ``CheckpointError`` / ``UnsupportedArchitectureError``."""
    from transformers import AutoConfig

    _check_directory(model_dir)
    try:
        config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"model directory {model_dir}: transformers cannot read its config.json ({exc})"
        ) from exc
    check_config(config, f"model directory {model_dir}")
    return config


def load_causal_lm(model_dir: str, dtype: torch.dtype) -> Any:
    """The causal LM saved in ``model_dir``, loaded offline with ``from_pretrained`` in
    ``dtype``, in eval mode. Raises ``CheckpointError`` (missing directory, no ``config.json``,
    unreadable config, no safetensors, weights that do not load, weights the model's
    ``config.json`` names but the safetensors lack, or hold but the model does not have) and
    ``UnsupportedArchitectureError`` (naming the architecture and the supported ones)."""
    from transformers import AutoModelForCausalLM

    config = read_config(model_dir)
    _check_weights(model_dir)
    try:
        # With output_loading_info, (model, {"missing_keys": [...], "unexpected_keys": ...}).
        loaded: Any = AutoModelForCausalLM.from_pretrained(
            model_dir,
            config=config,
            dtype=dtype,
            local_files_only=True,
            use_safetensors=True,
            output_loading_info=True,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(
            f"model directory {model_dir}: the weights do not load ({exc})"
        ) from exc
    model, loading = loaded
    # transformers initialises a missing weight at random and drops an unexpected one, with a
    # log line only: the exported program would not be the checkpoint's model.
    for kind, what in (
        ("missing_keys", "lacks weights that the model of its config.json needs"),
        ("unexpected_keys", "holds weights that the model of its config.json does not have"),
    ):
        names = sorted(loading.get(kind) or ())
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise CheckpointError(
                f"model directory {model_dir}: the checkpoint {what} ({shown}); check that "
                "config.json and the safetensors are the same model's"
            )
    return model.eval()
