"""ExecuTorch's ``ScalarType`` codes and the torch dtypes they are.

ExecuTorch 1.5.1 uses c10's ``ScalarType`` (``runtime/core/portable_type/scalar_type.h``), so a
code means what it means in PyTorch's C++ (``Float`` = 6, ``Long`` = 4, ``BFloat16`` = 15).
``executorch_trt.runtime``'s binding passes dtypes as these codes.
"""

from __future__ import annotations

import torch

#: ExecuTorch ``ScalarType`` code -> torch dtype, for every dtype a tensor can cross the binding
#: in (quantized and bit-packed types cannot).
TORCH_DTYPES: dict[int, torch.dtype] = {
    0: torch.uint8,
    1: torch.int8,
    2: torch.int16,
    3: torch.int32,
    4: torch.int64,
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    8: torch.complex32,
    9: torch.complex64,
    10: torch.complex128,
    11: torch.bool,
    15: torch.bfloat16,
    23: torch.float8_e5m2,
    24: torch.float8_e4m3fn,
    25: torch.float8_e5m2fnuz,
    26: torch.float8_e4m3fnuz,
    27: torch.uint16,
    28: torch.uint32,
    29: torch.uint64,
}

_CODES: dict[torch.dtype, int] = {dtype: code for code, dtype in TORCH_DTYPES.items()}


def scalar_type_code(dtype: torch.dtype) -> int:
    """ExecuTorch's code for ``dtype``; ``TypeError`` naming it when a tensor of that dtype
    cannot be passed to a program (a quantized dtype)."""
    try:
        return _CODES[dtype]
    except KeyError:
        raise TypeError(
            f"executorch_trt.runtime: tensors of dtype {dtype} cannot be passed to "
            "an ExecuTorch program"
        ) from None


def torch_dtype(code: int) -> torch.dtype:
    """The torch dtype of ExecuTorch's ``ScalarType`` ``code``; ``TypeError`` for a code with no
    torch dtype here."""
    try:
        return TORCH_DTYPES[code]
    except KeyError:
        raise TypeError(
            f"executorch_trt.runtime: ExecuTorch dtype code {code} has no torch dtype"
        ) from None
