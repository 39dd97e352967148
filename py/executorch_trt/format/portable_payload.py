"""Writer and fail-closed reader for the portable engine payload
(``docs/formats/portable_payload.md``, version 3).

Layout (little-endian)::

    0  magic "ETPE" | 4 version u32 (3) | 8 descriptor_size u64 |
    16 program_offset u64 (16-byte aligned) | 24 program_size u64 |
    32 descriptor JSON | pad to 16 | nested .pte (method "forward")

The descriptor is the engine's own description of its I/O, independent of the delegate
metadata: ``{"inputs": [...], "outputs": [...], "constants": [...]}``, the binding names in the
nested method's input/output order (engine binding order), and the layout of each external
constant the nested method loads from the outer program's named data
(``ConstantLayout``, by key). Version 2 (no ``"constants"``) is still read; version
1 (with ``"aliases"``) is rejected (re-export).

The reader follows the C++ one (``PortablePayload::Parse``,
``core/engine/portable/portable_payload.cpp``) check for check: names are non-empty strings,
unique over inputs and outputs together; constant keys are non-empty and unique, scalar
types known, sizes non-negative int32, dim orders permutations.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

from executorch_trt.format.blob import parse_json
from executorch_trt.format.fixed_header import check_version, unpack_header
from executorch_trt.format.scalar_types import TORCH_DTYPES

MAGIC = b"ETPE"
VERSION = 3
#: Versions the reader accepts: 2 is 3 without ``"constants"``.
READABLE_VERSIONS = (2, 3)
#: ExecuTorch's ``kTensorDimensionLimit``.
MAX_RANK = 16
HEADER_SIZE = 32
#: Byte offset of each header field (C++ ``kPortablePayloadOffset*`` in
#: ``core/engine/portable/portable_payload.h``): 4-byte magic, u32 version, then u64s.
HEADER_OFFSETS = {
    "magic": 0,
    "version": 4,
    "descriptor_size": 8,
    "program_offset": 16,
    "program_size": 24,
}
PROGRAM_ALIGNMENT = 16
_HEADER = struct.Struct("<4sIQQQ")
assert _HEADER.size == HEADER_SIZE


@dataclasses.dataclass(frozen=True)
class ConstantLayout:
    """A nested external constant's layout, as ``executorch::runtime::TensorLayout`` takes it.

    * ``scalar_type``: ExecuTorch's ``ScalarType`` code (6 = float32).
    * ``sizes``: one non-negative int32 per dimension.
    * ``dim_order``: a permutation of ``range(len(sizes))``.
    """

    scalar_type: int
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "scalar_type": self.scalar_type,
            "sizes": list(self.sizes),
            "dim_order": list(self.dim_order),
        }


@dataclasses.dataclass(frozen=True)
class PortableDescriptor:
    """Engine binding names in nested-method order, and the nested method's external
    constants' layouts by named-data key (``shared_data``)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    constants: tuple[tuple[str, ConstantLayout], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "constants": [{"key": k, **c.to_json()} for k, c in self.constants],
        }


@dataclasses.dataclass(frozen=True)
class PortablePayload:
    descriptor: PortableDescriptor
    program: bytes


def _validate(descriptor: PortableDescriptor) -> None:
    """Names are non-empty strings, unique over inputs and outputs together; constants as
    ``_validate_constant`` says, keys unique."""
    seen = set()
    for group, names in (("inputs", descriptor.inputs), ("outputs", descriptor.outputs)):
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(
                    f"portable payload: descriptor '{group}' has entry {name!r}; "
                    "names must be non-empty strings"
                )
            if name in seen:
                raise ValueError(
                    f"portable payload: descriptor names binding '{name}' twice; "
                    "names must be unique"
                )
            seen.add(name)
    keys = set()
    for key, layout in descriptor.constants:
        _validate_constant(key, layout)
        if key in keys:
            raise ValueError(f"portable payload: descriptor lists constant '{key}' twice")
        keys.add(key)


def _validate_constant(key: object, layout: ConstantLayout) -> None:
    """A non-empty key; a dtype with a torch equivalent (``scalar_types.TORCH_DTYPES``, what
    the writer emits); at most ``MAX_RANK`` sizes, each an int32 >= 0; ``dim_order`` a
    permutation of the dimensions."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"portable payload: constant key {key!r} must be a non-empty string")
    if type(layout.scalar_type) is not int or layout.scalar_type not in TORCH_DTYPES:
        raise ValueError(
            f"portable payload: constant '{key}' has unknown scalar_type {layout.scalar_type!r}"
        )
    sizes, order = layout.sizes, layout.dim_order
    if len(sizes) > MAX_RANK or any(type(s) is not int or not 0 <= s < 2**31 for s in sizes):
        raise ValueError(f"portable payload: constant '{key}' has bad sizes {list(sizes)}")
    if sorted(order) != list(range(len(sizes))) or any(type(d) is not int for d in order):
        raise ValueError(
            f"portable payload: constant '{key}' dim_order {list(order)} is not a "
            f"permutation of its {len(sizes)} dimensions"
        )


def _parse_constants(entries: object) -> tuple[tuple[str, ConstantLayout], ...]:
    """The descriptor's ``"constants"`` list; ``ValueError`` for a malformed entry."""
    if not isinstance(entries, list):
        raise ValueError("portable payload: descriptor 'constants' must be a list")
    out = []
    for entry in entries:
        fields = ("key", "scalar_type", "sizes", "dim_order")
        if (
            not isinstance(entry, dict)
            or sorted(entry) != sorted(fields)
            or not isinstance(entry["sizes"], list)
            or not isinstance(entry["dim_order"], list)
        ):
            raise ValueError(
                f"portable payload: constant entry {entry!r} needs exactly "
                "'key', 'scalar_type', 'sizes' (list), 'dim_order' (list)"
            )
        out.append(
            (
                entry["key"],
                ConstantLayout(
                    entry["scalar_type"], tuple(entry["sizes"]), tuple(entry["dim_order"])
                ),
            )
        )
    return tuple(out)


def write_portable_payload(descriptor: PortableDescriptor, program: bytes) -> bytes:
    """Serialises the descriptor and nested ``.pte``; raises ``ValueError`` if the descriptor
    is inconsistent (an empty or repeated name)."""
    _validate(descriptor)
    desc = json.dumps(descriptor.to_json(), separators=(",", ":")).encode("utf-8")
    program_offset = -(-(HEADER_SIZE + len(desc)) // PROGRAM_ALIGNMENT) * PROGRAM_ALIGNMENT
    header = _HEADER.pack(MAGIC, VERSION, len(desc), program_offset, len(program))
    pad = b"\0" * (program_offset - HEADER_SIZE - len(desc))
    return header + desc + pad + bytes(program)


def read_portable_payload(data: bytes) -> PortablePayload:
    """Parses a portable payload; raises ``ValueError`` naming the problem (short data, wrong
    magic/version, sections past the end, misaligned program, bad descriptor)."""
    data = bytes(data)
    _, version, desc_size, prog_off, prog_size = unpack_header(
        "portable payload", data, _HEADER, MAGIC
    )
    check_version("portable payload", "version", version, READABLE_VERSIONS)
    if HEADER_SIZE + desc_size > len(data):
        raise ValueError("portable payload: descriptor lies past the end of the payload")
    if prog_off < HEADER_SIZE + desc_size:
        raise ValueError(
            f"portable payload: bad program_offset {prog_off}: the program overlaps the descriptor"
        )
    if prog_off + prog_size > len(data):
        raise ValueError("portable payload: program lies past the end of the payload")
    if prog_off % PROGRAM_ALIGNMENT:
        raise ValueError(f"portable payload: program_offset {prog_off} is not 16-byte aligned")
    try:
        obj = parse_json(data[HEADER_SIZE : HEADER_SIZE + desc_size])
    except ValueError as e:
        raise ValueError(f"portable payload: descriptor is not UTF-8 JSON: {e}") from None
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("inputs"), list)
        or not isinstance(obj.get("outputs"), list)
    ):
        raise ValueError("portable payload: descriptor needs 'inputs' and 'outputs' lists")
    allowed = {"inputs", "outputs"} | ({"constants"} if version >= 3 else set())
    unknown = sorted(set(obj) - allowed)
    if unknown:
        # Version 1 carried "aliases" here; versions 2 and 3 keep them only in the blob metadata.
        raise ValueError(
            f"portable payload: descriptor has unknown key '{unknown[0]}'; "
            f"version {version} has only {sorted(allowed)}"
        )
    descriptor = PortableDescriptor(
        tuple(obj["inputs"]), tuple(obj["outputs"]), _parse_constants(obj.get("constants", []))
    )
    _validate(descriptor)
    return PortablePayload(descriptor, data[prog_off : prog_off + prog_size])
