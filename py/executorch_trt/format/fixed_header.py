"""The checks every binary format here starts with: a fixed-size little-endian header whose
first field is a magic and one of whose fields is a version (the delegate blob,
``docs/formats/delegate_blob.md``; the portable engine payload,
``docs/formats/portable_payload.md``). The C++ readers check the same, in the same order."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any


def unpack_header(
    what: str, data: bytes | memoryview, layout: struct.Struct, magic: bytes
) -> tuple[Any, ...]:
    """The header's fields (``layout.unpack_from(data, 0)``). Raises ``ValueError`` naming
    ``what`` when ``data`` is shorter than ``layout.size`` bytes or its first field is not
    ``magic`` (not a ``what`` at all)."""
    if len(data) < layout.size:
        raise ValueError(f"{what}: {len(data)} bytes is shorter than the {layout.size}-byte header")
    fields = layout.unpack_from(data, 0)
    if fields[0] != magic:
        raise ValueError(f"{what}: wrong magic {fields[0]!r}, expected {magic!r}")
    return fields


def check_version(what: str, field: str, version: int, readable: Sequence[int]) -> None:
    """Raises ``ValueError`` when ``version`` (the header's ``field``) is not one of the
    ``readable`` versions: the ``what`` was written by another executorch_trt, whose export
    this reader cannot follow."""
    if version not in readable:
        raise ValueError(
            f"{what}: {field} {version} is not supported (this reader supports "
            f"{', '.join(map(str, readable))}); re-export the model with a matching "
            "executorch_trt"
        )
