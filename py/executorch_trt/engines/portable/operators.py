"""The operators the portable engine implements: every group of ``op_groups`` (a decoder block
end to end).

The nested program runs them on ExecuTorch's own CPU kernels (the portable and optimized
kernel libraries the wheel ships), and ``executorch_trt::kv_cache_update.out`` on the delegate
library's kernel (``core/kernels``), which writes only the new rows when the binding plan gives
the output its cache's storage.
"""

from __future__ import annotations

from typing import FrozenSet

from executorch_trt.engines import op_groups

#: Schema names (``namespace::name``) the portable engine takes.
SUPPORTED_OPS: FrozenSet[str] = op_groups.DECODER
