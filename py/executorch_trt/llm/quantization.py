"""Weight quantization of a causal LM's linears, as ExecuTorch's LLM recipe applies it.

``quantize(model, "8da4w", group_size)`` is torchao's ``quantize_`` with
``Int8DynamicActivationIntxWeightConfig`` (int8 dynamic per-token activations, int4 or int8
weights with one scale per ``group_size`` input channels, scales chosen by HQQ), on the
``nn.Linear`` layers whose ``in_features`` the group size divides: the recipe's ``8da4w`` /
``8da8w`` modes (``examples/models/llama/source_transformation/quantize.py`` in ExecuTorch
1.5.1, ``use_hqq=True`` by default there). The portable engine's nested XNNPACK runs each such
linear as its dynamically quantized linear; the norms stay float.

``embedding="int8"`` / ``"int4"`` also quantizes the ``nn.Embedding`` tables weight-only, as
the recipe's ``--embedding-quantize 8,0`` / ``4,<group size>`` (torchao ``IntxWeightOnlyConfig``:
int8 with one scale per row, int4 with one scale per ``group_size`` columns). ExecuTorch's quant
fusion turns each into ``quantized_decomposed::embedding_byte`` / ``embedding_4bit``, which
ExecuTorch's quantized kernels run (a row gather, no float table). A tied table is untied: the
``lm_head`` linear keeps its own (8da4w) copy, as in the recipe.

The recipe's default group size for 8da4w (128) divides neither 576 (SmolLM-135M's hidden size)
nor 1536 (its MLP), so every linear would stay float; ``DEFAULT_GROUP_SIZE`` (32) divides the
widths of the models this project tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: Scheme -> the weights' dtype (a torch attribute). "8da" = int8 dynamic activations.
SCHEMES = {"8da4w": "int4", "8da8w": "int8"}

#: Embedding scheme -> the table's dtype (a torch attribute).
EMBEDDING_SCHEMES = {"int8": "int8", "int4": "int4"}

#: Input channels per weight scale (0: one scale per output channel).
DEFAULT_GROUP_SIZE = 32


def quantizable_linears(model: torch.nn.Module, group_size: int) -> list[str]:
    """Names of the ``nn.Linear`` layers of ``model`` whose ``in_features`` ``group_size``
    divides (every linear for ``group_size`` 0), in module order."""
    import torch

    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
        and (group_size == 0 or module.in_features % group_size == 0)
    ]


def check_scheme(scheme: str, group_size: int, embedding: str | None = None) -> None:
    """Raises ``ValueError`` unless ``scheme`` is one of ``SCHEMES``, ``embedding`` None or one
    of ``EMBEDDING_SCHEMES``, and ``group_size`` is 0 or a power of two >= 32 (XNNPACK's grouped
    int4 linears take multiples of 32), and 0 with ``"8da8w"`` (XNNPACK groups int4 weights
    only); ``embedding="int4"`` needs a group size (ExecuTorch's embedding_4bit kernel takes
    grouped scales), so it goes with ``"8da4w"`` only."""
    if scheme not in SCHEMES:
        raise ValueError(
            f"quantize: unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}"
        )
    if embedding is not None and embedding not in EMBEDDING_SCHEMES:
        raise ValueError(
            f"quantize: unknown embedding scheme {embedding!r}; expected one of "
            f"{', '.join(EMBEDDING_SCHEMES)} (or None to keep the embedding float)"
        )
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise ValueError(f"quantize: group_size must be an int, got {group_size!r}")
    if group_size != 0 and (group_size < 32 or group_size & (group_size - 1)):
        raise ValueError(
            f"quantize: group_size must be 0 (per output channel) or a power of two >= 32 "
            f"(XNNPACK's grouped linears take multiples of 32), got {group_size}"
        )
    if scheme == "8da8w" and embedding == "int4":
        raise ValueError(
            "quantize: embedding='int4' needs a group size, which 8da8w's linears cannot take "
            "(XNNPACK groups int4 weights only): use embedding='int8' with 8da8w, or 8da4w"
        )
    if scheme == "8da8w" and group_size != 0:
        raise ValueError(
            f"quantize: 8da8w takes one scale per output channel (XNNPACK groups int4 weights "
            f"only): pass group_size=0 (export_llm --group-size 0), got {group_size}"
        )
    if embedding == "int4" and group_size == 0:
        raise ValueError("quantize: embedding='int4' needs a group size (e.g. 32), not 0")


def quantize(
    model: torch.nn.Module,
    scheme: str = "8da4w",
    group_size: int = DEFAULT_GROUP_SIZE,
    embedding: str | None = None,
) -> list[str]:
    """Quantizes ``model``'s linears (and with ``embedding`` its embedding tables) in place
    (torchao ``quantize_``) and returns the names of the modules quantized, linears first.

    Args:
        model: a float32 module (torchao's dynamic activation quantization computes in float32).
        scheme: ``"8da4w"`` (int4 weights) or ``"8da8w"`` (int8 weights).
        group_size: input channels per weight scale, a power of two >= 32 that divides the
            ``in_features`` of the linears to quantize; 0 for one scale per output channel.
            Linears it does not divide stay float.
        embedding: ``None`` (float tables), ``"int8"`` (one scale per row) or ``"int4"`` (one
            scale per ``group_size`` columns, which it must divide).

    Raises ``ValueError`` for an unknown scheme, a group size that is not 0 or a power of two
    >= 16, a model that is not float32, when no linear qualifies (nothing would be
    quantized: name a group size that divides the widths), or for ``embedding="int4"`` with a
    group size that does not divide an embedding's width.
    """
    import torch

    check_scheme(scheme, group_size, embedding)
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise ValueError(
            f"quantize: the model's parameters must be float32 (torchao's dynamic activation "
            f"quantization computes in float32), got {sorted(map(str, dtypes))}"
        )
    names = quantizable_linears(model, group_size)
    if not names:
        widths = sorted({m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear)})
        raise ValueError(
            f"quantize: group_size {group_size} divides the in_features of no linear "
            f"(widths {widths}); pick one that divides them, e.g. 32"
        )
    modules = dict(model.named_modules())
    tables = [n for n, m in modules.items() if isinstance(m, torch.nn.Embedding)]
    if embedding == "int4":
        table_widths = sorted({modules[n].embedding_dim for n in tables})
        if any(w % group_size for w in table_widths):
            raise ValueError(
                f"quantize: group_size {group_size} does not divide the embedding widths "
                f"{table_widths}; pick one that does, or embedding='int8'"
            )
    from torchao.quantization import quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
    )

    chosen = set(names)
    config: Any = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=getattr(torch, SCHEMES[scheme]),
        weight_granularity=PerAxis(0) if group_size == 0 else PerGroup(group_size),
        intx_choose_qparams_algorithm="hqq_scale_only",
    )
    with torch.no_grad():
        quantize_(model, config, filter_fn=lambda module, fqn: fqn in chosen)
        if embedding is not None and tables:
            # quantize_ gives each table its own quantized weight: a table tied to lm_head
            # (already quantized above) keeps no float copy.
            table_config = IntxWeightOnlyConfig(
                weight_dtype=getattr(torch, EMBEDDING_SCHEMES[embedding]),
                granularity=PerAxis(0) if embedding == "int8" else PerGroup(group_size),
            )
            quantize_(
                model,
                table_config,
                filter_fn=lambda module, fqn: isinstance(module, torch.nn.Embedding),
            )
            names += tables
    return names
