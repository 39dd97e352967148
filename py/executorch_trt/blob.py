"""Writer and fail-closed reader for the delegate blob (``core/blob/FORMAT.md``, version 1).

The blob is what ``TensorRTBackend.preprocess`` returns and ``TensorRTBackend::init`` (C++)
receives::

    [64-byte header][UTF-8 JSON metadata][pad to 16][engine payload]

Header (little-endian): magic ``b"ETRT"``, ``header_size`` u32 (64), ``format_version`` u32
(1), reserved u32, ``required_features`` u64, ``metadata_offset``/``metadata_size`` u64,
``payload_offset`` (16-byte aligned)/``payload_size`` u64, ``checksum`` u64.

The writer always sets the ``CHECKSUM`` feature: ``checksum`` is the BLAKE2b-64 (RFC 7693,
8-byte digest, read little-endian) of every byte from ``metadata_offset`` to the end of the
payload. Readers verify it when the bit is set; blobs of older writers (bit clear, field 0)
still read.

Every reader check mirrors the C++ reader: a blob this module rejects, the runtime rejects too
(version skew fails closed, FORMAT.md "A reader fails closed").
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import struct
from typing import Any, Dict, List, Sequence, Tuple

MAGIC = b"ETRT"
HEADER_SIZE = 64
FORMAT_VERSION = 1
PAYLOAD_ALIGNMENT = 16

_HEADER = struct.Struct("<4sIIIQQQQQQ")
assert _HEADER.size == HEADER_SIZE

#: dtype names allowed in bindings (FORMAT.md "dtypes").
DTYPES = (
    "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64",
    "bool",
)
ENGINES = ("portable", "tensorrt")
ALIAS_KINDS = ("kv_cache_update", "user")
OWNERSHIPS = ("caller",)


class Feature(enum.IntFlag):
    """``required_features`` bits (FORMAT.md "Required features")."""

    ALIASED_IO = 1 << 0
    OWNERSHIP = 1 << 1
    CHECKSUM = 1 << 2


KNOWN_FEATURES = Feature.ALIASED_IO | Feature.OWNERSHIP | Feature.CHECKSUM
CHECKSUM_OFFSET = 56


def checksum(data: bytes) -> int:
    """BLAKE2b-64 of ``data`` as the little-endian u64 stored at header offset 56
    (FORMAT.md "Integrity"; C++: ``core/blob/checksum.h``)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


@dataclasses.dataclass(frozen=True)
class BlobHeader:
    """The fixed 64-byte header. Offsets are from the start of the blob."""

    format_version: int
    required_features: int
    metadata_offset: int
    metadata_size: int
    payload_offset: int
    payload_size: int
    header_size: int = HEADER_SIZE
    #: BLAKE2b-64 of the metadata, padding and payload when ``required_features`` has
    #: ``CHECKSUM``; else 0.
    checksum: int = 0

    def pack(self) -> bytes:
        return _HEADER.pack(
            MAGIC, self.header_size, self.format_version, 0, self.required_features,
            self.metadata_offset, self.metadata_size, self.payload_offset, self.payload_size,
            self.checksum,
        )


@dataclasses.dataclass(frozen=True)
class Binding:
    """One engine I/O binding: ``name`` (engine binding name), ``dtype`` (one of ``DTYPES``),
    ``shape`` (static sizes, one int per dimension)."""

    name: str
    dtype: str
    shape: Tuple[int, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclasses.dataclass(frozen=True)
class AliasedIO:
    """An engine output whose storage is the storage of an engine input.

    ``kind`` says who enforces the alias (``kv_cache_update``: the engine; ``user``: declared,
    shape-checked only); ``ownership`` who owns the storage (``caller``: above the delegate).
    Both are recorded separately (DESIGN.md contract 1).
    """

    output: str
    input: str
    kind: str = "kv_cache_update"
    ownership: str = "caller"

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class DelegateMetadata:
    """The metadata JSON. ``inputs`` are in delegate argument order, ``outputs`` in delegate
    output order: ``execute()`` argument ``i`` binds to ``inputs[i]`` and argument
    ``len(inputs) + j`` to ``outputs[j]`` (DESIGN.md contract 3)."""

    engine: str
    inputs: Tuple[Binding, ...]
    outputs: Tuple[Binding, ...]
    aliased_io: Tuple[AliasedIO, ...] = ()

    def required_features(self) -> int:
        features = Feature(0)
        if self.aliased_io:
            features |= Feature.ALIASED_IO | Feature.OWNERSHIP
        return int(features)

    def to_json(self) -> Dict[str, Any]:
        return {
            "engine": self.engine,
            "inputs": [b.to_json() for b in self.inputs],
            "outputs": [b.to_json() for b in self.outputs],
            "aliased_io": [a.to_json() for a in self.aliased_io],
        }

    def aliased_output_to_input(self) -> Dict[int, int]:
        """Maps an output position to the input position it aliases (delegate argument
        indices, not names)."""
        in_pos = {b.name: i for i, b in enumerate(self.inputs)}
        out_pos = {b.name: j for j, b in enumerate(self.outputs)}
        return {out_pos[a.output]: in_pos[a.input] for a in self.aliased_io}


@dataclasses.dataclass(frozen=True)
class DelegateBlob:
    """A parsed blob: header, validated metadata, and the engine payload bytes."""

    header: BlobHeader
    metadata: DelegateMetadata
    payload: bytes


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def write_blob(metadata: DelegateMetadata, payload: bytes) -> bytes:
    """Serialises ``metadata`` and ``payload`` into a version-1 blob with the ``CHECKSUM``
    feature (the header's ``checksum`` covers metadata, padding and payload).

    The metadata is validated first (``validate_metadata``), so the writer never produces a blob
    the reader would reject. Raises ``ValueError`` naming the offending field.
    """
    validate_metadata(metadata)
    meta_bytes = json.dumps(metadata.to_json(), separators=(",", ":")).encode("utf-8")
    metadata_offset = HEADER_SIZE
    payload_offset = _align(metadata_offset + len(meta_bytes), PAYLOAD_ALIGNMENT)
    padding = b"\0" * (payload_offset - metadata_offset - len(meta_bytes))
    body = meta_bytes + padding + bytes(payload)
    header = BlobHeader(
        format_version=FORMAT_VERSION,
        required_features=metadata.required_features() | int(Feature.CHECKSUM),
        metadata_offset=metadata_offset,
        metadata_size=len(meta_bytes),
        payload_offset=payload_offset,
        payload_size=len(payload),
        checksum=checksum(body),
    )
    return header.pack() + body


def _check_range(name: str, offset: int, size: int, total: int) -> None:
    end = offset + size
    if end > (1 << 64) - 1 or end > total:
        raise ValueError(
            f"delegate blob: {name} [offset {offset}, size {size}] lies past the end of the "
            f"{total}-byte blob"
        )


def read_header(data: bytes) -> BlobHeader:
    """Parses and validates the header. Raises ``ValueError`` naming the problem: short blob,
    wrong magic, unsupported version, unknown required feature, bad ``header_size``, a
    section outside the blob, or (``CHECKSUM``) a checksum that does not match the bytes."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise ValueError(f"delegate blob: {len(data)} bytes is shorter than the 64-byte header")
    (magic, header_size, version, reserved, features, m_off, m_size, p_off, p_size, stored) = (
        _HEADER.unpack_from(data, 0)
    )
    if magic != MAGIC:
        raise ValueError(f"delegate blob: wrong magic {magic!r}, expected {MAGIC!r}")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"delegate blob: format_version {version} is not supported (this reader supports "
            f"{FORMAT_VERSION}); re-export the model with a matching executorch_trt"
        )
    unknown = features & ~int(KNOWN_FEATURES)
    if unknown:
        raise ValueError(
            f"delegate blob: required_features has unknown bits 0x{unknown:x}; this reader "
            f"knows 0x{int(KNOWN_FEATURES):x}"
        )
    if reserved != 0:
        raise ValueError(
            f"delegate blob: reserved field at offset 12 is 0x{reserved:08x}, expected 0; the blob "
            "is corrupted; re-export"
        )
    if header_size < HEADER_SIZE:
        raise ValueError(f"delegate blob: header_size {header_size} < {HEADER_SIZE}")
    _check_range("header", 0, header_size, len(data))
    _check_range("metadata", m_off, m_size, len(data))
    _check_range("payload", p_off, p_size, len(data))
    if p_off % PAYLOAD_ALIGNMENT:
        raise ValueError(f"delegate blob: payload_offset {p_off} is not 16-byte aligned")
    _verify_checksum(data, features, m_off, m_size, p_off, p_size, stored)
    return BlobHeader(version, features, m_off, m_size, p_off, p_size, header_size, stored)


def _verify_checksum(data: bytes, features: int, m_off: int, m_size: int, p_off: int,
                     p_size: int, stored: int) -> None:
    """FORMAT.md "Integrity" (mirrors the C++ reader)."""
    if not features & Feature.CHECKSUM:
        if stored != 0:
            raise ValueError(
                f"delegate blob: checksum field is 0x{stored:016x} but required_features "
                f"0x{features:x} lacks the CHECKSUM bit (the field is 0 without it); the blob "
                "is corrupted; re-export"
            )
        return  # an older writer: nothing to verify
    if m_off + m_size > p_off:
        raise ValueError(
            f"delegate blob: metadata [offset {m_off}, size {m_size}] does not end before the "
            f"payload at offset {p_off}; the blob is corrupted; re-export"
        )
    end = p_off + p_size
    actual = checksum(memoryview(data)[m_off:end])
    if actual != stored:
        raise ValueError(
            f"delegate blob: checksum mismatch over bytes [{m_off}, {end}): expected "
            f"0x{stored:016x} (stored in the header), actual 0x{actual:016x}; the blob is "
            "corrupted; re-export"
        )


def _parse_binding(entry: Any, where: str) -> Binding:
    if not isinstance(entry, dict):
        raise ValueError(f"delegate blob: {where} is not an object")
    name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
    if not isinstance(name, str) or not name:
        raise ValueError(f"delegate blob: {where} has no name")
    if dtype not in DTYPES:
        raise ValueError(f"delegate blob: binding '{name}' has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ValueError(f"delegate blob: binding '{name}' has invalid shape {shape!r}")
    return Binding(name, dtype, tuple(shape))


def _parse_alias(entry: Any, index: int, required_features: int) -> AliasedIO:
    if not isinstance(entry, dict):
        raise ValueError(f"delegate blob: aliased_io[{index}] is not an object")
    output, input_ = entry.get("output"), entry.get("input")
    if not isinstance(output, str) or not isinstance(input_, str):
        raise ValueError(f"delegate blob: aliased_io[{index}] needs string 'output' and 'input'")
    # A missing kind (older writer) means kv_cache_update (FORMAT.md).
    kind = entry.get("kind", "kv_cache_update")
    # A missing ownership is "caller" unless the blob declares the OWNERSHIP feature.
    if "ownership" not in entry:
        if required_features & Feature.OWNERSHIP:
            raise ValueError(
                f"delegate blob: aliased output '{output}' has no 'ownership' although the blob "
                "requires the OWNERSHIP feature"
            )
        return AliasedIO(output, input_, kind, "caller")
    return AliasedIO(output, input_, kind, entry["ownership"])


def validate_metadata(metadata: DelegateMetadata) -> None:
    """Checks the cross-field rules of FORMAT.md; raises ``ValueError`` naming the binding."""
    if metadata.engine not in ENGINES:
        raise ValueError(f"delegate blob: unknown engine {metadata.engine!r}")
    for group, bindings in (("input", metadata.inputs), ("output", metadata.outputs)):
        seen = set()
        for b in bindings:
            if b.name in seen:
                raise ValueError(f"delegate blob: duplicate {group} binding '{b.name}'")
            seen.add(b.name)
            if b.dtype not in DTYPES:
                raise ValueError(f"delegate blob: binding '{b.name}' has unknown dtype {b.dtype!r}")
    inputs = {b.name: b for b in metadata.inputs}
    outputs = {b.name: b for b in metadata.outputs}
    aliased_outputs = set()
    for a in metadata.aliased_io:
        if a.kind not in ALIAS_KINDS:
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' has unknown kind {a.kind!r} "
                f"(known: {', '.join(ALIAS_KINDS)})"
            )
        if a.ownership not in OWNERSHIPS:
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' has unknown ownership "
                f"{a.ownership!r} (known: {', '.join(OWNERSHIPS)})"
            )
        if a.output not in outputs:
            raise ValueError(f"delegate blob: aliased output '{a.output}' is not an output binding")
        if a.input not in inputs:
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' names input '{a.input}', which is "
                f"not an input binding"
            )
        if a.output in aliased_outputs:
            raise ValueError(f"delegate blob: output '{a.output}' is aliased twice")
        aliased_outputs.add(a.output)
        i, o = inputs[a.input], outputs[a.output]
        if (i.dtype, i.shape) != (o.dtype, o.shape):
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' ({o.dtype}{list(o.shape)}) does not "
                f"match input '{a.input}' ({i.dtype}{list(i.shape)})"
            )


def read_blob(data: bytes) -> DelegateBlob:
    """Parses a blob written by ``write_blob`` (or the same format from another writer).

    Fails closed: any header problem (``read_header``), metadata that is not a UTF-8 JSON object,
    a missing ``inputs``/``outputs``, an unknown engine/dtype/alias kind/ownership, an alias that
    names a non-binding, or ``ALIASED_IO`` entries without the ``ALIASED_IO`` feature bit raise
    ``ValueError`` naming the problem.
    """
    data = bytes(data)
    header = read_header(data)
    raw = data[header.metadata_offset : header.metadata_offset + header.metadata_size]
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"delegate blob: metadata is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ValueError("delegate blob: metadata is not a JSON object")
    for key in ("engine", "inputs", "outputs"):
        if key not in obj:
            raise ValueError(f"delegate blob: metadata has no '{key}'")
    if not isinstance(obj["inputs"], list) or not isinstance(obj["outputs"], list):
        raise ValueError("delegate blob: 'inputs' and 'outputs' must be lists")
    aliases_raw = obj.get("aliased_io", [])
    if not isinstance(aliases_raw, list):
        raise ValueError("delegate blob: 'aliased_io' must be a list")
    metadata = DelegateMetadata(
        engine=obj["engine"],
        inputs=tuple(_parse_binding(e, f"inputs[{i}]") for i, e in enumerate(obj["inputs"])),
        outputs=tuple(_parse_binding(e, f"outputs[{i}]") for i, e in enumerate(obj["outputs"])),
        aliased_io=tuple(
            _parse_alias(e, i, header.required_features) for i, e in enumerate(aliases_raw)
        ),
    )
    validate_metadata(metadata)
    if metadata.aliased_io and not header.required_features & Feature.ALIASED_IO:
        raise ValueError(
            "delegate blob: metadata has aliased_io entries but required_features lacks "
            "ALIASED_IO (a reader that ignored them would bind the wrong storage)"
        )
    payload = data[header.payload_offset : header.payload_offset + header.payload_size]
    return DelegateBlob(header, metadata, payload)


def bindings_from(
    names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]]
) -> List[Binding]:
    """Zips parallel lists into ``Binding`` objects (convenience for tests and writers)."""
    return [Binding(n, d, tuple(int(x) for x in s)) for n, d, s in zip(names, dtypes, shapes)]
