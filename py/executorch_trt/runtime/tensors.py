"""Tensors across the runtime binding: the specs a method declares, inputs passed to it and
outputs returned from it (no copy where the layout allows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from executorch_trt.format.scalar_types import scalar_type_code, torch_dtype


class TensorSpec(NamedTuple):
    """A tensor's dtype and shape as the program declares it."""

    dtype: torch.dtype
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{str(self.dtype).replace('torch.', '')} {list(self.shape)}"


class MethodMetadata(NamedTuple):
    """A method's declared inputs and outputs, in order: a ``TensorSpec`` per tensor, ``None``
    for a value that is not a tensor (an int, a float, a bool)."""

    inputs: tuple[TensorSpec | None, ...]
    outputs: tuple[TensorSpec | None, ...]


def spec_of(entry: tuple[Any, ...]) -> TensorSpec | None:
    return TensorSpec(torch_dtype(entry[0]), tuple(entry[1])) if entry else None


def tensor_from_bytes(data: Any, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """A tensor viewing ``data`` (a writable buffer; the tensor keeps it alive), no copy."""
    if len(data) == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).view(tuple(shape))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def input_arg(x: Any, index: int, keep: list[torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(
                f"input {index}: a tensor on {x.device}; ExecuTorch runs on CPU "
                "tensors (pass x.cpu())"
            )
        if x.layout != torch.strided:
            raise ValueError(
                f"input {index}: a tensor of layout {x.layout}; ExecuTorch takes "
                "dense (strided) tensors (pass x.to_dense())"
            )
        # A negative or conjugate view's memory holds the values before negation/conjugation
        # (and contiguous() keeps the bit): resolve them, a copy, so the method sees the values.
        x = x.resolve_conj().resolve_neg()
        if not x.is_contiguous():
            x = x.contiguous()
        keep.append(x)
        return (x.data_ptr(), scalar_type_code(x.dtype), tuple(x.shape))
    if isinstance(x, int) and not isinstance(x, bool) and not _INT64_MIN <= x <= _INT64_MAX:
        raise ValueError(
            f"input {index}: the int {x} does not fit in int64 (ExecuTorch's int, "
            f"[{_INT64_MIN}, {_INT64_MAX}])"
        )
    if x is None or isinstance(x, (bool, int, float)):
        return x
    raise TypeError(
        f"input {index}: expected a torch.Tensor, int, float, bool or None, got {type(x).__name__}"
    )
