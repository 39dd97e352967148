"""Writer and fail-closed reader for the portable engine payload
(``core/engine/PORTABLE_FORMAT.md``, version 2).

Layout (little-endian)::

    0  magic "ETPE" | 4 version u32 (2) | 8 descriptor_size u64 |
    16 program_offset u64 (16-byte aligned) | 24 program_size u64 |
    32 descriptor JSON | pad to 16 | nested .pte (method "forward")

The descriptor is the engine's own description of its I/O, independent of the delegate
metadata: ``{"inputs": [...], "outputs": [...]}``, the binding names in the nested method's
input/output order (engine binding order). Version 2 is version 1 without the descriptor's
``"aliases"``: the alias decision is stored once, in the blob metadata's ``aliased_io``, and the
portable engine takes its aliases from there. Version 1 payloads are rejected (re-export).

The reader follows the C++ one (``PortablePayload::Parse``, ``core/engine/portable_payload.cpp``)
check for check: names are non-empty strings, unique over inputs and outputs together.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any, Dict, Tuple

from executorch_trt.blob import parse_json

MAGIC = b"ETPE"
VERSION = 2
HEADER_SIZE = 32
#: Byte offset of each header field (C++ ``kPortablePayloadOffset*`` in
#: ``core/engine/portable_payload.h``): 4-byte magic, u32 version, then u64s.
HEADER_OFFSETS = {"magic": 0, "version": 4, "descriptor_size": 8, "program_offset": 16,
                  "program_size": 24}
PROGRAM_ALIGNMENT = 16
_HEADER = struct.Struct("<4sIQQQ")
assert _HEADER.size == HEADER_SIZE


@dataclasses.dataclass(frozen=True)
class PortableDescriptor:
    """Engine binding names in nested-method order."""

    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"inputs": list(self.inputs), "outputs": list(self.outputs)}


@dataclasses.dataclass(frozen=True)
class PortablePayload:
    descriptor: PortableDescriptor
    program: bytes


def _validate(descriptor: PortableDescriptor) -> None:
    """Names are non-empty strings, unique over inputs and outputs together."""
    seen = set()
    for group, names in (("inputs", descriptor.inputs), ("outputs", descriptor.outputs)):
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"portable payload: descriptor '{group}' has entry {name!r}; "
                                 "names must be non-empty strings")
            if name in seen:
                raise ValueError(f"portable payload: descriptor names binding '{name}' twice; "
                                 "names must be unique")
            seen.add(name)


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
    if len(data) < HEADER_SIZE:
        raise ValueError(f"portable payload: {len(data)} bytes is shorter than the header")
    magic, version, desc_size, prog_off, prog_size = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise ValueError(f"portable payload: wrong magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise ValueError(f"portable payload: version {version} is not supported ({VERSION}); "
                         "re-export with a matching version")
    if HEADER_SIZE + desc_size > len(data):
        raise ValueError("portable payload: descriptor lies past the end of the payload")
    if prog_off < HEADER_SIZE + desc_size:
        raise ValueError(f"portable payload: bad program_offset {prog_off}: the program "
                         "overlaps the descriptor")
    if prog_off + prog_size > len(data):
        raise ValueError("portable payload: program lies past the end of the payload")
    if prog_off % PROGRAM_ALIGNMENT:
        raise ValueError(f"portable payload: program_offset {prog_off} is not 16-byte aligned")
    try:
        obj = parse_json(data[HEADER_SIZE : HEADER_SIZE + desc_size])
    except ValueError as e:
        raise ValueError(f"portable payload: descriptor is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("inputs"), list) or not isinstance(
        obj.get("outputs"), list
    ):
        raise ValueError("portable payload: descriptor needs 'inputs' and 'outputs' lists")
    unknown = sorted(set(obj) - {"inputs", "outputs"})
    if unknown:
        # Version 1 carried "aliases" here; version 2 keeps them only in the blob metadata.
        raise ValueError(f"portable payload: descriptor has unknown key '{unknown[0]}'; "
                         "version 2 has only 'inputs' and 'outputs'")
    descriptor = PortableDescriptor(tuple(obj["inputs"]), tuple(obj["outputs"]))
    _validate(descriptor)
    return PortablePayload(descriptor, data[prog_off : prog_off + prog_size])
