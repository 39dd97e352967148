"""Writer and fail-closed reader for the delegate blob (``docs/formats/delegate_blob.md``, versions
1 and 2; version 2 adds dynamic dimensions: ``symbols`` and symbol names in binding shapes).

The blob is what ``TensorRTBackend.preprocess`` returns and ``TensorRTBackend::init`` (C++)
receives::

    [64-byte header][UTF-8 JSON metadata][pad to 16][engine payload]

Header (little-endian): magic ``b"ETRT"``, ``header_size`` u32 (64), ``format_version`` u32
(1, or 2 when a binding has a dynamic dimension), reserved u32, ``required_features`` u64,
``metadata_offset``/``metadata_size`` u64, ``payload_offset`` (16-byte aligned)/``payload_size``
u64, ``checksum`` u64. The constants are in ``executorch_trt.format.wire``.

The writer always sets the ``CHECKSUM`` feature: ``checksum`` is the BLAKE2b-64 (RFC 7693,
8-byte digest, read little-endian) of every byte from ``metadata_offset`` to the end of the
payload. Readers verify it when the bit is set; blobs of older writers (bit clear, field 0)
still read.

The C++ runtime is the reference reader; this one follows it stage by stage, with the same
checks in the same order, so a blob this module rejects the runtime rejects too, and the
reverse (version skew fails closed, ``docs/formats/delegate_blob.md``: "A reader fails closed"):

* ``read_header``: ``BlobHeader::Parse`` (``core/blob/blob_header.cpp``);
* ``parse_metadata``: ``DelegateMetadata::Parse`` (``core/blob/delegate_metadata.cpp``);
* ``check_bindings``: the rules of ``BindingPlan::Create`` (``core/binding/binding_plan.cpp``)
  that do not need the engine: binding names unique over inputs and outputs together, an alias
  names an output and an input, one alias per output and per input, same dtype and shape;
  (version 2) every declared symbol is a dimension of an input, aliased bindings are static.

The writer runs ``parse_metadata`` and ``check_bindings`` on the JSON it is about to write, so
it never produces a blob the reader would reject.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

from executorch_trt.format.fixed_header import check_version, unpack_header
from executorch_trt.format.wire import (
    ALIAS_KINDS,
    ALIAS_KV_CACHE_UPDATE,
    BLOB_CHECKSUM_OFFSET,
    BLOB_FORMAT_VERSION,
    BLOB_FORMAT_VERSION_DYNAMIC,
    BLOB_FORMAT_VERSIONS,
    BLOB_HEADER_SIZE,
    BLOB_MAGIC,
    BLOB_PAYLOAD_ALIGNMENT,
    DTYPES,
    ENGINES,
    KNOWN_FEATURES,
    MAX_DIMENSION,
    MAX_RANK,
    OWNERSHIP_CALLER,
    OWNERSHIPS,
    Feature,
)

_HEADER = struct.Struct("<4sIIIQQQQQQ")
assert _HEADER.size == BLOB_HEADER_SIZE
assert struct.calcsize("<4sIIIQQQQQ") == BLOB_CHECKSUM_OFFSET


def checksum(data: bytes | memoryview) -> int:
    """BLAKE2b-64 of ``data`` as the little-endian u64 stored at header offset 56
    (``docs/formats/delegate_blob.md`` "Integrity"; C++: ``core/blob/checksum.h``)."""
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
    header_size: int = BLOB_HEADER_SIZE
    #: BLAKE2b-64 of the metadata, padding and payload when ``required_features`` has
    #: ``CHECKSUM``; else 0.
    checksum: int = 0

    def pack(self) -> bytes:
        return _HEADER.pack(
            BLOB_MAGIC,
            self.header_size,
            self.format_version,
            0,
            self.required_features,
            self.metadata_offset,
            self.metadata_size,
            self.payload_offset,
            self.payload_size,
            self.checksum,
        )


#: One binding dimension: a static size, or the name of a ``SymbolRange`` (format version 2).
Dimension = int | str


@dataclasses.dataclass(frozen=True)
class Binding:
    """One engine I/O binding: ``name`` (engine binding name), ``dtype`` (a ``wire.DTYPES``
    name), ``shape`` (one entry per dimension: a static int in ``[0, 2^31)``, or the name of a
    ``DelegateMetadata.symbols`` entry for a dynamic dimension)."""

    name: str
    dtype: str
    shape: tuple[Dimension, ...]

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclasses.dataclass(frozen=True)
class SymbolRange:
    """A dynamic dimension shared by every binding dimension that names it (format version
    2): each call's value lies in ``[min, max]``; ``opt`` (``min <= opt <= max``) is the size
    to tune for (a TensorRT optimization profile's opt shape; the example input's size).
    Sizes are element counts in ``[0, 2^31)``."""

    name: str
    min: int
    max: int
    opt: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class AliasedIO:
    """An engine output whose storage is the storage of an engine input.

    ``kind`` says who enforces the alias (``kv_cache_update``: the engine; ``user``: declared,
    shape-checked only); ``ownership`` who owns the storage (``caller``: above the delegate).
    Both are recorded separately (``docs/contract.md`` 1, "Ownership").
    """

    output: str
    input: str
    kind: str = ALIAS_KV_CACHE_UPDATE
    ownership: str = OWNERSHIP_CALLER

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class DelegateMetadata:
    """The metadata JSON. ``inputs`` are in delegate argument order, ``outputs`` in delegate
    output order: ``execute()`` argument ``i`` binds to ``inputs[i]`` and argument
    ``len(inputs) + j`` to ``outputs[j]`` (``docs/contract.md`` 3, "Order")."""

    engine: str
    inputs: tuple[Binding, ...]
    outputs: tuple[Binding, ...]
    aliased_io: tuple[AliasedIO, ...] = ()
    #: The dynamic dimensions (format version 2); empty for a static delegate (version 1).
    symbols: tuple[SymbolRange, ...] = ()

    @property
    def format_version(self) -> int:
        """2 when a binding has a dynamic dimension, else 1 (so a static delegate's blob
        still loads in a version-1 runtime)."""
        return BLOB_FORMAT_VERSION_DYNAMIC if self.symbols else BLOB_FORMAT_VERSION

    def required_features(self) -> int:
        features = Feature(0)
        if self.aliased_io:
            features |= Feature.ALIASED_IO | Feature.OWNERSHIP
        return int(features)

    def to_json(self) -> dict[str, Any]:
        obj = {
            "engine": self.engine,
            "inputs": [b.to_json() for b in self.inputs],
            "outputs": [b.to_json() for b in self.outputs],
            "aliased_io": [a.to_json() for a in self.aliased_io],
        }
        if self.symbols:
            obj["symbols"] = [s.to_json() for s in self.symbols]
        return obj

    def aliased_output_to_input(self) -> dict[int, int]:
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
    """Serialises ``metadata`` and ``payload`` into a blob of ``metadata.format_version`` (1,
    or 2 with dynamic dimensions) with the ``CHECKSUM`` feature (the header's ``checksum``
    covers metadata, padding and payload).

    The metadata JSON is checked by the reader's own ``parse_metadata`` and ``check_bindings``
    first, so the writer never produces a blob the reader would reject. Raises ``ValueError``
    naming the offending field.
    """
    meta_bytes = json.dumps(metadata.to_json(), separators=(",", ":")).encode("utf-8")
    features = metadata.required_features() | int(Feature.CHECKSUM)
    check_bindings(parse_metadata(meta_bytes, features, metadata.format_version))
    metadata_offset = BLOB_HEADER_SIZE
    payload_offset = _align(metadata_offset + len(meta_bytes), BLOB_PAYLOAD_ALIGNMENT)
    padding = b"\0" * (payload_offset - metadata_offset - len(meta_bytes))
    body = meta_bytes + padding + bytes(payload)
    header = BlobHeader(
        format_version=metadata.format_version,
        required_features=features,
        metadata_offset=metadata_offset,
        metadata_size=len(meta_bytes),
        payload_offset=payload_offset,
        payload_size=len(payload),
        checksum=checksum(body),
    )
    return header.pack() + body


# --- header: BlobHeader::Parse --------------------------------------------------------------


def _check_section(name: str, offset: int, size: int, header_size: int, total: int) -> None:
    """``[offset, offset + size)`` lies after the header and inside the blob (C++
    ``SectionFits``)."""
    if offset < header_size:
        raise ValueError(
            f"delegate blob: {name}_offset {offset} overlaps the {header_size}-byte header; "
            "the blob is corrupt, re-export it"
        )
    if offset + size > total:
        raise ValueError(
            f"delegate blob: {name} [offset {offset}, size {size}] lies past the end of the "
            f"{total}-byte blob"
        )


def read_header(data: bytes | memoryview, *, verify_checksum: bool = True) -> BlobHeader:
    """Parses and validates the header, in ``BlobHeader::Parse``'s order. Raises ``ValueError``
    naming the problem: short blob, wrong magic, unsupported version, unknown required feature,
    non-zero reserved field, ``header_size`` below 64 or past the end, a section that overlaps
    the header or lies outside the blob, a misaligned payload, or (``verify_checksum``) a
    checksum that does not match the bytes. ``verify_checksum=False`` skips the integrity
    check (and its reading of the whole payload)."""
    data = memoryview(data)
    (_, header_size, version, reserved, features, m_off, m_size, p_off, p_size, stored) = (
        unpack_header("delegate blob", data, _HEADER, BLOB_MAGIC)
    )
    check_version("delegate blob", "format_version", version, BLOB_FORMAT_VERSIONS)
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
    if header_size < BLOB_HEADER_SIZE or header_size > len(data):
        raise ValueError(
            f"delegate blob: header_size {header_size} is not in [{BLOB_HEADER_SIZE}, "
            f"{len(data)}] (the header must fit the {len(data)}-byte blob)"
        )
    _check_section("metadata", m_off, m_size, header_size, len(data))
    _check_section("payload", p_off, p_size, header_size, len(data))
    if p_off % BLOB_PAYLOAD_ALIGNMENT:
        raise ValueError(
            f"delegate blob: payload_offset {p_off} is not {BLOB_PAYLOAD_ALIGNMENT}-byte aligned"
        )
    header = BlobHeader(version, features, m_off, m_size, p_off, p_size, header_size, stored)
    if verify_checksum:
        _verify_checksum(data, header)
    return header


def _verify_checksum(data: memoryview, h: BlobHeader) -> None:
    """``docs/formats/delegate_blob.md`` "Integrity" (C++ ``VerifyChecksum``)."""
    if not h.required_features & Feature.CHECKSUM:
        if h.checksum != 0:
            raise ValueError(
                f"delegate blob: checksum field is 0x{h.checksum:016x} but required_features "
                f"0x{h.required_features:x} lacks the CHECKSUM bit (the field is 0 without it); "
                "the blob is corrupted; re-export"
            )
        return  # an older writer: nothing to verify
    if h.metadata_offset + h.metadata_size > h.payload_offset:
        raise ValueError(
            f"delegate blob: metadata [offset {h.metadata_offset}, size {h.metadata_size}] does "
            f"not end before the payload at offset {h.payload_offset}; the blob is corrupted; "
            "re-export"
        )
    end = h.payload_offset + h.payload_size
    actual = checksum(data[h.metadata_offset : end])
    if actual != h.checksum:
        raise ValueError(
            f"delegate blob: checksum mismatch over bytes [{h.metadata_offset}, {end}): expected "
            f"0x{h.checksum:016x} (stored in the header), actual 0x{actual:016x}; the blob is "
            "corrupted; re-export"
        )


# --- metadata: DelegateMetadata::Parse ------------------------------------------------------


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity: Python extensions nlohmann rejects


def parse_json(text: bytes | memoryview) -> Any:
    """Parses ``text`` as the C++ runtime's ``nlohmann::json::parse`` does (strict RFC 8259):
    a leading UTF-8 BOM is skipped; ``NaN``/``Infinity``, unpaired surrogate escapes, invalid
    UTF-8 and trailing bytes are rejected. Raises ``ValueError`` saying why."""
    try:
        obj = json.loads(bytes(text).decode("utf-8-sig"), parse_constant=_reject_constant)
        json.dumps(obj, ensure_ascii=False).encode("utf-8")  # unpaired surrogates raise here
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return obj


def _string(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if key not in obj:
        raise ValueError(f"delegate blob: {where} has no '{key}'")
    if not isinstance(value, str):
        raise ValueError(
            f"delegate blob: {where} field '{key}' must be a string, got {type(value).__name__}"
        )
    return value


def _size(value: Any) -> bool:
    """Whether ``value`` is a JSON integer in ``[0, 2^31)`` (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DIMENSION


def _parse_symbol(entry: Any, index: int) -> SymbolRange:
    where = f"symbols[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"delegate blob: {where} is not an object")
    name = _string(entry, "name", where)
    if not name:
        raise ValueError(f"delegate blob: {where} has an empty name")
    values = []
    for key in ("min", "max", "opt"):
        if key not in entry or not _size(entry[key]):
            raise ValueError(
                f"delegate blob: symbol '{name}' field '{key}' must be an integer "
                f"in [0, 2^31), got {entry.get(key)!r}"
            )
        values.append(entry[key])
    lo, hi, opt = values
    if not lo <= opt <= hi:
        raise ValueError(
            f"delegate blob: symbol '{name}' needs min <= opt <= max, got min {lo}, "
            f"opt {opt}, max {hi}"
        )
    return SymbolRange(name, lo, hi, opt)


def _parse_symbols(obj: dict[str, Any], version: int) -> tuple[SymbolRange, ...]:
    if "symbols" not in obj:
        return ()
    if version < BLOB_FORMAT_VERSION_DYNAMIC:
        raise ValueError(
            f"delegate blob: 'symbols' needs format_version "
            f"{BLOB_FORMAT_VERSION_DYNAMIC}, the header says {version}"
        )
    entries = obj["symbols"]
    if not isinstance(entries, list):
        raise ValueError("delegate blob: 'symbols' must be a list")
    symbols = tuple(_parse_symbol(e, i) for i, e in enumerate(entries))
    names = [s.name for s in symbols]
    if len(set(names)) != len(names):
        raise ValueError(f"delegate blob: symbol names repeat in {names}")
    return symbols


def _parse_binding(entry: Any, where: str, symbols: dict[str, SymbolRange]) -> Binding:
    if not isinstance(entry, dict):
        raise ValueError(f"delegate blob: {where} is not an object")
    name = _string(entry, "name", where)
    if not name:
        raise ValueError(f"delegate blob: {where} has no name")
    dtype = _string(entry, "dtype", f"binding '{name}'")
    if dtype not in DTYPES:
        raise ValueError(f"delegate blob: binding '{name}' has unknown dtype {dtype!r}")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(_size(d) or isinstance(d, str) for d in shape):
        raise ValueError(
            f"delegate blob: binding '{name}' has invalid shape {shape!r}; dimensions must be "
            "integers in [0, 2^31) or (format version 2) names of symbols"
        )
    for dim, d in enumerate(shape):
        if isinstance(d, str) and d not in symbols:
            raise ValueError(
                f"delegate blob: binding '{name}' dimension {dim} names symbol "
                f"{d!r}, which 'symbols' does not declare"
            )
    if len(shape) > MAX_RANK:
        raise ValueError(
            f"delegate blob: binding '{name}' has {len(shape)} dimensions; at "
            f"most {MAX_RANK} are supported"
        )
    return Binding(name, dtype, tuple(shape))


def _parse_bindings(
    obj: dict[str, Any], key: str, symbols: dict[str, SymbolRange]
) -> tuple[Binding, ...]:
    entries = obj.get(key)
    if key not in obj:
        raise ValueError(f"delegate blob: metadata has no '{key}'")
    if not isinstance(entries, list):
        raise ValueError("delegate blob: 'inputs' and 'outputs' must be lists")
    return tuple(_parse_binding(e, f"{key}[{i}]", symbols) for i, e in enumerate(entries))


def _parse_alias(entry: Any, index: int, required_features: int) -> AliasedIO:
    if not isinstance(entry, dict):
        raise ValueError(f"delegate blob: aliased_io[{index}] is not an object")
    output = _string(entry, "output", f"aliased_io[{index}]")
    input_ = _string(entry, "input", f"aliased_io[{index}]")
    named = f"aliased output '{output}'"
    # A missing kind (older writer) means kv_cache_update (docs/formats/delegate_blob.md).
    kind = _string(entry, "kind", named) if "kind" in entry else ALIAS_KV_CACHE_UPDATE
    if kind not in ALIAS_KINDS:
        raise ValueError(
            f"delegate blob: {named} has unknown kind {kind!r} (known: {', '.join(ALIAS_KINDS)})"
        )
    # A missing ownership is "caller" unless the blob declares the OWNERSHIP feature.
    if "ownership" not in entry:
        if required_features & Feature.OWNERSHIP:
            raise ValueError(
                f"delegate blob: {named} has no 'ownership' although the blob "
                "requires the OWNERSHIP feature"
            )
        return AliasedIO(output, input_, kind, OWNERSHIP_CALLER)
    ownership = _string(entry, "ownership", named)
    if ownership not in OWNERSHIPS:
        raise ValueError(
            f"delegate blob: {named} has unknown ownership {ownership!r} "
            f"(known: {', '.join(OWNERSHIPS)})"
        )
    return AliasedIO(output, input_, kind, ownership)


def parse_metadata(
    text: bytes | memoryview, required_features: int, version: int = BLOB_FORMAT_VERSION
) -> DelegateMetadata:
    """Parses the metadata JSON of a blob whose header (``format_version`` ``version``)
    requires ``required_features``, in ``DelegateMetadata::Parse``'s order: a UTF-8 JSON
    object; ``engine`` (a ``wire.ENGINES`` name); ``symbols`` (version 2 only, optional: each
    ``{name, min, max, opt}``, unique non-empty names, ``0 <= min <= opt <= max < 2^31``);
    ``inputs`` and ``outputs`` (each binding an object with a non-empty ``name``, a
    ``wire.DTYPES`` ``dtype`` and a ``shape`` of at most ``MAX_RANK`` integers in
    ``[0, 2^31)`` or declared symbol names); ``aliased_io``
    (optional; strings ``output``/``input``, ``kind`` and ``ownership`` known when present,
    ``ownership`` required under ``OWNERSHIP``); entries require the ``ALIASED_IO`` bit. Raises
    ``ValueError`` naming the problem. Cross-binding rules are ``check_bindings``'."""
    try:
        obj = parse_json(text)
    except ValueError as e:  # UnicodeError and json.JSONDecodeError are ValueErrors
        raise ValueError(f"delegate blob: metadata is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ValueError("delegate blob: metadata is not a JSON object")
    engine = _string(obj, "engine", "metadata")
    if engine not in ENGINES:
        raise ValueError(f"delegate blob: unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    symbols = _parse_symbols(obj, version)
    by_name = {sym.name: sym for sym in symbols}
    inputs = _parse_bindings(obj, "inputs", by_name)
    outputs = _parse_bindings(obj, "outputs", by_name)
    aliases_raw = obj.get("aliased_io", [])
    if not isinstance(aliases_raw, list):
        raise ValueError("delegate blob: 'aliased_io' must be a list")
    aliases = tuple(_parse_alias(e, i, required_features) for i, e in enumerate(aliases_raw))
    if aliases and not required_features & Feature.ALIASED_IO:
        raise ValueError(
            "delegate blob: metadata has aliased_io entries but required_features lacks "
            "ALIASED_IO (a reader that ignored them would bind the wrong storage)"
        )
    return DelegateMetadata(engine, inputs, outputs, aliases, symbols)


# --- bindings: BindingPlan::Create, without the engine --------------------------------------


def check_bindings(metadata: DelegateMetadata) -> None:
    """The rules the runtime's binding plan checks before it consults the engine
    (``BindingPlan::Create``): binding names are unique over inputs and outputs together; each
    ``aliased_io`` entry names an output binding and an input binding; an output is aliased
    once and an input by one output at most; an output has its input's dtype and shape, and
    both are static (a dynamic state tensor is not supported); every symbol is a dimension of
    some input (so each call's inputs give its value). Raises ``ValueError`` naming the
    binding or the symbol."""
    seen = set()
    for b in metadata.inputs + metadata.outputs:
        if b.name in seen:
            raise ValueError(
                f"delegate blob: duplicate binding name '{b.name}' (names are "
                "unique over inputs and outputs)"
            )
        seen.add(b.name)
    inputs = {b.name: b for b in metadata.inputs}
    outputs = {b.name: b for b in metadata.outputs}
    aliased_outputs, aliased_inputs = set(), set()
    for a in metadata.aliased_io:
        if a.output not in outputs:
            raise ValueError(f"delegate blob: aliased output '{a.output}' is not an output binding")
        if a.input not in inputs:
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' names input '{a.input}', which is "
                f"not an input binding"
            )
        if a.output in aliased_outputs:
            raise ValueError(f"delegate blob: output '{a.output}' is aliased twice")
        if a.input in aliased_inputs:
            raise ValueError(
                f"delegate blob: input '{a.input}' is aliased by two outputs; two "
                "outputs cannot update one input in place"
            )
        aliased_outputs.add(a.output)
        aliased_inputs.add(a.input)
        i, o = inputs[a.input], outputs[a.output]
        if (i.dtype, i.shape) != (o.dtype, o.shape):
            raise ValueError(
                f"delegate blob: aliased output '{a.output}' ({o.dtype}{list(o.shape)}) does not "
                f"match input '{a.input}' ({i.dtype}{list(i.shape)})"
            )
        if not i.is_static:
            raise ValueError(
                f"delegate blob: aliased input '{a.input}' has a dynamic shape "
                f"{list(i.shape)}; aliased (state) bindings must be static"
            )
    in_inputs = {d for b in metadata.inputs for d in b.shape if isinstance(d, str)}
    for sym in metadata.symbols:
        if sym.name not in in_inputs:
            raise ValueError(
                f"delegate blob: symbol '{sym.name}' is not a dimension of any "
                "input, so no call can give its value"
            )


# --- whole blobs -----------------------------------------------------------------------------


def _metadata_of(data: memoryview, header: BlobHeader) -> DelegateMetadata:
    start = header.metadata_offset
    metadata = parse_metadata(
        data[start : start + header.metadata_size], header.required_features, header.format_version
    )
    check_bindings(metadata)
    return metadata


def read_metadata(data: bytes | memoryview) -> DelegateMetadata:
    """The validated metadata of a blob: ``read_header`` without the checksum (which reads
    the whole payload), ``parse_metadata`` and ``check_bindings``. For a blob this process
    just wrote (the in-place planning pass reads the alias decision of each delegate); use
    ``read_blob`` for bytes from elsewhere. Raises ``ValueError``."""
    data = memoryview(data)
    return _metadata_of(data, read_header(data, verify_checksum=False))


def read_blob(data: bytes | memoryview) -> DelegateBlob:
    """Parses a blob written by ``write_blob`` (or the same format from another writer).

    Fails closed: any problem ``read_header`` (checksum included), ``parse_metadata`` or
    ``check_bindings`` finds raises ``ValueError`` naming it.
    """
    data = memoryview(bytes(data))
    header = read_header(data)
    metadata = _metadata_of(data, header)
    payload = bytes(data[header.payload_offset : header.payload_offset + header.payload_size])
    return DelegateBlob(header, metadata, payload)
