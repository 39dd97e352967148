"""Writer and fail-closed reader for the portable engine payload
(``core/engine/PORTABLE_FORMAT.md``, version 1).

Layout (little-endian)::

    0  magic "ETPE" | 4 version u32 (1) | 8 descriptor_size u64 |
    16 program_offset u64 (16-byte aligned) | 24 program_size u64 |
    32 descriptor JSON | pad to 16 | nested .pte (method "forward")

The descriptor is the engine's own description of its I/O, independent of the delegate
metadata: ``{"inputs": [...], "outputs": [...], "aliases": {output: input}}`` with names in the
nested method's input/output order (engine binding order).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Dict, Tuple

MAGIC = b"ETPE"
VERSION = 1
HEADER_SIZE = 32
PROGRAM_ALIGNMENT = 16
_HEADER = struct.Struct("<4sIQQQ")
assert _HEADER.size == HEADER_SIZE


@dataclasses.dataclass(frozen=True)
class PortableDescriptor:
    """Engine binding names in nested-method order and the engine's in-place aliases."""

    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    aliases: Dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> Dict:
        return {"inputs": list(self.inputs), "outputs": list(self.outputs),
                "aliases": dict(self.aliases)}


@dataclasses.dataclass(frozen=True)
class PortablePayload:
    descriptor: PortableDescriptor
    program: bytes


def _validate(descriptor: PortableDescriptor) -> None:
    for group, names in (("input", descriptor.inputs), ("output", descriptor.outputs)):
        if len(set(names)) != len(names):
            raise ValueError(f"portable payload: duplicate {group} names {list(names)}")
    for out, inp in descriptor.aliases.items():
        if out not in descriptor.outputs:
            raise ValueError(f"portable payload: alias output '{out}' is not an engine output")
        if inp not in descriptor.inputs:
            raise ValueError(
                f"portable payload: alias of '{out}' names '{inp}', which is not an engine input"
            )


def write_portable_payload(descriptor: PortableDescriptor, program: bytes) -> bytes:
    """Serialises the descriptor and nested ``.pte``; raises ``ValueError`` if the descriptor
    is inconsistent (duplicate names, alias naming a non-binding)."""
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
        raise ValueError(f"portable payload: version {version} is not supported ({VERSION})")
    if HEADER_SIZE + desc_size > len(data):
        raise ValueError("portable payload: descriptor lies past the end of the payload")
    if prog_off % PROGRAM_ALIGNMENT or prog_off < HEADER_SIZE + desc_size:
        raise ValueError(f"portable payload: bad program_offset {prog_off}")
    if prog_off + prog_size > len(data):
        raise ValueError("portable payload: program lies past the end of the payload")
    try:
        obj = json.loads(data[HEADER_SIZE : HEADER_SIZE + desc_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"portable payload: descriptor is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("inputs"), list) or not isinstance(
        obj.get("outputs"), list
    ):
        raise ValueError("portable payload: descriptor needs 'inputs' and 'outputs' lists")
    aliases = obj.get("aliases", {})
    if not isinstance(aliases, dict):
        raise ValueError("portable payload: 'aliases' must be an object")
    descriptor = PortableDescriptor(tuple(obj["inputs"]), tuple(obj["outputs"]), dict(aliases))
    _validate(descriptor)
    return PortablePayload(descriptor, data[prog_off : prog_off + prog_size])
