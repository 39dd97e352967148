"""Weight quantization of a causal LM's linears, as ExecuTorch's LLM recipe applies it.

``quantize(model, "8da4w", group_size)`` is torchao's ``quantize_`` with
``Int8DynamicActivationIntxWeightConfig`` (int8 dynamic per-token activations, int4 or int8
weights with one scale per ``group_size`` input channels, scales chosen by HQQ), on the
``nn.Linear`` layers whose ``in_features`` the group size divides: the recipe's ``8da4w`` /
``8da8w`` modes (``examples/models/llama/source_transformation/quantize.py`` in ExecuTorch
1.5.1, ``use_hqq=True`` by default there). The portable engine's nested XNNPACK runs each such
linear as its dynamically quantized linear; the embedding and the norms stay float.

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


def check_scheme(scheme: str, group_size: int) -> None:
    """Raises ``ValueError`` unless ``scheme`` is one of ``SCHEMES`` and ``group_size`` is 0 or
    a power of two >= 16 (XNNPACK's grouped int4/int8 linears)."""
    if scheme not in SCHEMES:
        raise ValueError(
            f"quantize: unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}"
        )
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise ValueError(f"quantize: group_size must be an int, got {group_size!r}")
    if group_size != 0 and (group_size < 16 or group_size & (group_size - 1)):
        raise ValueError(
            f"quantize: group_size must be 0 (per output channel) or a power of two >= 16, "
            f"got {group_size}"
        )


def quantize(
    model: torch.nn.Module, scheme: str = "8da4w", group_size: int = DEFAULT_GROUP_SIZE
) -> list[str]:
    """Quantizes ``model``'s linears in place (torchao ``quantize_``) and returns their names.

    Args:
        model: a float32 module (torchao's dynamic activation quantization computes in float32).
        scheme: ``"8da4w"`` (int4 weights) or ``"8da8w"`` (int8 weights).
        group_size: input channels per weight scale, a power of two >= 16 that divides the
            ``in_features`` of the linears to quantize; 0 for one scale per output channel.
            Linears it does not divide stay float.

    Raises ``ValueError`` for an unknown scheme, a group size that is not 0 or a power of two
    >= 16, a model that is not float32, or when no linear qualifies (nothing would be
    quantized: name a group size that divides the widths).
    """
    import torch

    check_scheme(scheme, group_size)
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
    from torchao.quantization import quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig

    chosen = set(names)
    config: Any = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=getattr(torch, SCHEMES[scheme]),
        weight_granularity=PerAxis(0) if group_size == 0 else PerGroup(group_size),
        intx_choose_qparams_algorithm="hqq_scale_only",
    )
    with torch.no_grad():
        quantize_(model, config, filter_fn=lambda module, fqn: fqn in chosen)
    return names
