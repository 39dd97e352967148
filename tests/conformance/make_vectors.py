"""Writes tests/conformance/vectors.json: bytes -> expected outcome for both blob readers.

The delegate blob (docs/formats/delegate_blob.md) and the portable engine payload
(docs/formats/portable_payload.md) each have two readers: the C++ runtime's (the reference) and
the exporter's Python one. Instead of keeping the Python reader a mirror by hand, both are run
over the same checked-in vectors (tests/cpp/conformance_test.cpp,
tests/py/conformance_test.py), so a check one reader has and the other lacks fails a test.

Each vector: ``name``, ``reader`` ("blob": header + checksum + metadata + the binding rules
that need no engine; "payload": the portable payload header and descriptor), ``hex`` (the
bytes), ``expect`` ("ok", "invalid" = C++ Error::InvalidProgram, "incompatible" = C++
Error::DelegateInvalidCompatibility; Python raises ValueError for both), and for "ok" a
``summary`` both readers must reproduce.

Valid bytes come from the package's own writers; invalid ones are those bytes changed at the
named offsets of ``executorch_trt.format.wire`` / ``format.portable_payload``. Regenerate (and
review the diff) only when a format changes:

    ./bazelw run //tests/conformance:make_vectors -- --out $PWD/tests/conformance/vectors.json
"""

from __future__ import annotations

import argparse
import json
import struct
from typing import Any

from executorch_trt.format import blob as B
from executorch_trt.format import portable_payload as P
from executorch_trt.format import wire as W

_U32 = {"header_size", "format_version", "reserved"}


def _put(data: bytes, field: str, value: int) -> bytes:
    """``data`` with blob header ``field`` set to ``value`` (checksum not recomputed)."""
    out = bytearray(data)
    fmt = "<I" if field in _U32 else "<Q"
    struct.pack_into(fmt, out, W.BLOB_HEADER_OFFSETS[field], value)
    return bytes(out)


def _reseal(data: bytes) -> bytes:
    """Recomputes the checksum of a blob laid out as ``write_blob`` does (payload last)."""
    start = struct.unpack_from("<Q", data, W.BLOB_HEADER_OFFSETS["metadata_offset"])[0]
    return _put(data, "checksum", B.checksum(data[start:]))


def _raw_blob(
    meta: Any,
    payload: bytes = b"PAYLOAD!",
    features: int = 0b111,
    version: int = W.BLOB_FORMAT_VERSION,
) -> bytes:
    """A blob around arbitrary metadata (a JSON value or raw bytes), laid out as ``write_blob``
    lays it out but without its validation, so that invalid metadata can be written."""
    meta_bytes = meta if isinstance(meta, bytes) else json.dumps(meta).encode("utf-8")
    m_off = W.BLOB_HEADER_SIZE
    p_off = -(-(m_off + len(meta_bytes)) // W.BLOB_PAYLOAD_ALIGNMENT) * W.BLOB_PAYLOAD_ALIGNMENT
    body = meta_bytes + b"\0" * (p_off - m_off - len(meta_bytes)) + payload
    checksum = B.checksum(body) if features & W.Feature.CHECKSUM else 0
    header = B.BlobHeader(
        version, features, m_off, len(meta_bytes), p_off, len(payload), checksum=checksum
    )
    return header.pack() + body


def _v2(meta: Any) -> bytes:
    return _raw_blob(meta, version=W.BLOB_FORMAT_VERSION_DYNAMIC)


def _symbol(name: str = "T", lo: int = 1, hi: int = 16, opt: int = 4) -> dict[str, Any]:
    return {"name": name, "min": lo, "max": hi, "opt": opt}


def _dynamic_meta(**overrides) -> dict[str, Any]:
    """A prefill-like delegate: ``x[1, T, 4]`` and ``pos[T]`` share ``T``; the cache is
    static and aliased; ``y[1, T, 4]``."""
    meta = _meta(
        inputs=[
            _binding("k_cache"),
            _binding("x", shape=(1, "T", 4)),
            _binding("pos", "int64", ("T",)),
        ],
        outputs=[_binding("k_cache_out"), _binding("y", shape=(1, "T", 4))],
        symbols=[_symbol()],
    )
    meta.update(overrides)
    return meta


def _binding(name: str, dtype: str = "float32", shape=(1, 8, 4)) -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "shape": list(shape)}


def _meta(**overrides) -> dict[str, Any]:
    meta = {
        "engine": "portable",
        "inputs": [
            _binding("k_cache"),
            _binding("x", shape=(1, 4)),
            _binding("pos", "int64", (1,)),
        ],
        "outputs": [_binding("k_cache_out"), _binding("y", shape=(1, 4))],
        "aliased_io": [
            {
                "output": "k_cache_out",
                "input": "k_cache",
                "kind": "kv_cache_update",
                "ownership": "caller",
            }
        ],
    }
    meta.update(overrides)
    return meta


def _alias(output="k_cache_out", input_="k_cache", **extra) -> dict[str, Any]:
    entry = {"output": output, "input": input_, "kind": "kv_cache_update", "ownership": "caller"}
    entry.update(extra)
    return entry


def blob_summary(meta: B.DelegateMetadata) -> dict[str, Any]:
    """What a reader must reproduce from an accepted blob (the vectors' ``summary``; the Python
    reader's test compares ``read_blob``'s metadata through this too)."""
    return {
        "engine": meta.engine,
        "inputs": [[b.name, b.dtype, list(b.shape)] for b in meta.inputs],
        "outputs": [[b.name, b.dtype, list(b.shape)] for b in meta.outputs],
        "aliased_io": [[a.output, a.input, a.kind, a.ownership] for a in meta.aliased_io],
        "symbols": [[s.name, s.min, s.max, s.opt] for s in meta.symbols],
    }


def blob_vectors() -> list[dict[str, Any]]:
    v: list[dict[str, Any]] = []

    def add(name, data, expect="invalid"):
        entry = {"name": name, "reader": "blob", "hex": data.hex(), "expect": expect}
        if expect == "ok":
            entry["summary"] = blob_summary(B.read_blob(data).metadata)
        v.append(entry)

    good = B.write_blob(B.parse_metadata(json.dumps(_meta()).encode(), 0b11), b"PAYLOAD!")
    add("ok_written_by_exporter", good, "ok")
    add("ok_no_aliases", _raw_blob(_meta(aliased_io=[]), features=int(W.Feature.CHECKSUM)), "ok")
    add(
        "ok_aliased_io_omitted",
        _raw_blob({k: x for k, x in _meta().items() if k != "aliased_io"}, features=0),
        "ok",
    )
    add("ok_older_writer_without_checksum", _raw_blob(_meta(), features=0b11), "ok")
    add(
        "ok_missing_kind_is_kv_cache_update",
        _raw_blob(
            _meta(aliased_io=[{"output": "k_cache_out", "input": "k_cache", "ownership": "caller"}])
        ),
        "ok",
    )
    add(
        "ok_missing_ownership_without_feature",
        _raw_blob(
            _meta(aliased_io=[{"output": "k_cache_out", "input": "k_cache"}]), features=0b101
        ),
        "ok",
    )
    add("ok_user_kind", _raw_blob(_meta(aliased_io=[_alias(kind="user")])), "ok")
    add("ok_tensorrt_engine", _raw_blob(_meta(engine="tensorrt")), "ok")
    add(
        "ok_every_dtype",
        _raw_blob(
            _meta(
                inputs=[_binding(f"in_{d}", d, (2,)) for d in W.DTYPES], outputs=[], aliased_io=[]
            )
        ),
        "ok",
    )
    add(
        "ok_scalar_zero_and_largest_dimension",
        _raw_blob(
            _meta(
                inputs=[
                    _binding("s", shape=()),
                    _binding("z", shape=(0, 4)),
                    _binding("big", "int8", (W.MAX_DIMENSION,)),
                ],
                outputs=[],
                aliased_io=[],
            )
        ),
        "ok",
    )
    add(
        "ok_utf8_bom_and_unicode_names",
        _raw_blob(
            b"\xef\xbb\xbf"
            + json.dumps(
                _meta(
                    inputs=[
                        _binding("k\u00e9"),
                        _binding("x", shape=(1, 4)),
                        _binding("pos", "int64", (1,)),
                    ],
                    aliased_io=[_alias(input_="k\u00e9")],
                )
            ).encode()
        ),
        "ok",
    )
    add(
        "ok_duplicate_json_key_last_wins",
        _raw_blob(
            json.dumps(_meta())
            .replace('"engine": "portable"', '"engine": "tensorrt", "engine": "portable"')
            .encode()
        ),
        "ok",
    )
    add("ok_unknown_metadata_key_ignored", _raw_blob(_meta(comment="from a newer writer")), "ok")

    # Header.
    add("short_63_bytes", good[:63])
    add("empty", b"")
    add("wrong_magic", b"ETRX" + good[4:])
    add("format_version_3", _put(good, "format_version", 3), "incompatible")
    add("ok_version_2_static", _put(good, "format_version", 2), "ok")
    add("format_version_0", _put(good, "format_version", 0), "incompatible")
    add(
        "unknown_required_feature", _reseal(_put(good, "required_features", 0b1111)), "incompatible"
    )
    add("reserved_not_zero", _put(good, "reserved", 1))
    add("header_size_63", _put(good, "header_size", 63))
    add("header_size_past_end", _put(good, "header_size", len(good) + 1))
    add("metadata_overlaps_header", _put(good, "metadata_offset", 60))
    add("metadata_past_end", _put(good, "metadata_size", len(good)))
    add("payload_past_end", _put(good, "payload_size", 9))
    add(
        "payload_misaligned",
        _put(_put(good, "payload_offset", len(good) - 8 - 8), "payload_size", 8),
    )
    add(
        "payload_offset_overflows",
        _put(_put(good, "payload_offset", 2**64 - 16), "payload_size", 32),
    )
    add("metadata_size_overflows", _put(good, "metadata_size", 2**64 - 1))
    add("checksum_mismatch", good[:-1] + b"?")
    add("checksum_field_changed", _put(good, "checksum", 1))
    add("checksum_without_feature", _put(_raw_blob(_meta(), features=0b11), "checksum", 7))
    meta_bytes = json.dumps(_meta()).encode()
    after = b"P" * 16 + meta_bytes  # payload at 64, metadata after it
    add(
        "checksum_metadata_after_payload",
        B.BlobHeader(
            W.BLOB_FORMAT_VERSION, 0b111, 80, len(meta_bytes), 64, 16, checksum=B.checksum(after)
        ).pack()
        + after,
    )
    # Metadata JSON.
    add("metadata_not_json", _raw_blob(b"{not json"))
    add("metadata_trailing_bytes", _raw_blob(json.dumps(_meta()).encode() + b" x"))
    add("metadata_nan", _raw_blob(json.dumps(_meta()).replace("[1, 4]", "[1, NaN]").encode()))
    add(
        "metadata_invalid_utf8",
        _raw_blob(
            json.dumps(_meta()).replace('"x"', '"\\u0078\x01"').encode().replace(b"\x01", b"\xff")
        ),
    )
    add(
        "metadata_unpaired_surrogate",
        _raw_blob(json.dumps(_meta()).replace('"x"', '"\\ud800"').encode()),
    )
    add("metadata_array", _raw_blob([_meta()]))
    add("metadata_deeply_nested", _raw_blob(b'{"engine": ' + b"[" * 5000 + b"]" * 5000 + b"}"))
    add("engine_unknown", _raw_blob(_meta(engine="cuda")))
    add("engine_not_string", _raw_blob(_meta(engine=1)))
    add("engine_missing", _raw_blob({k: x for k, x in _meta().items() if k != "engine"}))
    add("inputs_missing", _raw_blob({k: x for k, x in _meta().items() if k != "inputs"}))
    add("inputs_not_list", _raw_blob(_meta(inputs={"x": 1})))
    add("binding_not_object", _raw_blob(_meta(inputs=["x"], aliased_io=[])))
    add(
        "binding_empty_name",
        _raw_blob(_meta(outputs=[_binding("k_cache_out"), _binding("", shape=(1, 4))])),
    )
    add(
        "binding_name_not_string",
        _raw_blob(_meta(outputs=[_binding("k_cache_out"), _binding(7, shape=(1, 4))])),
    )
    add(
        "dtype_unknown",
        _raw_blob(
            _meta(
                inputs=[
                    _binding("k_cache"),
                    _binding("x", "fp32", (1, 4)),
                    _binding("pos", "int64", (1,)),
                ]
            )
        ),
    )
    for label, dim in (
        ("negative", -1),
        ("two_to_the_31", W.MAX_DIMENSION + 1),
        ("float", 4.0),
        ("bool", True),
        ("string", "4"),
        ("huge", 10**20),
    ):
        add(
            f"dimension_{label}",
            _raw_blob(
                _meta(
                    outputs=[
                        _binding("k_cache_out"),
                        {"name": "y", "dtype": "float32", "shape": [1, dim]},
                    ]
                )
            ),
        )
    add(
        "shape_not_list",
        _raw_blob(
            _meta(outputs=[_binding("k_cache_out"), {"name": "y", "dtype": "float32", "shape": 4}])
        ),
    )
    add("aliased_io_not_list", _raw_blob(_meta(aliased_io={"k_cache_out": "k_cache"})))
    add("alias_not_object", _raw_blob(_meta(aliased_io=["k_cache_out"])))
    add("alias_kind_unknown", _raw_blob(_meta(aliased_io=[_alias(kind="magic")])))
    add("alias_ownership_unknown", _raw_blob(_meta(aliased_io=[_alias(ownership="engine")])))
    add(
        "alias_ownership_missing_under_feature",
        _raw_blob(_meta(aliased_io=[{"output": "k_cache_out", "input": "k_cache"}])),
    )
    add("alias_input_not_string", _raw_blob(_meta(aliased_io=[_alias(input_=3)])))
    add("aliases_without_aliased_io_feature", _raw_blob(_meta(), features=0b100))
    # Binding rules that need no engine (BindingPlan::Create / blob.check_bindings).
    add(
        "duplicate_name_input_and_output",
        _raw_blob(_meta(outputs=[_binding("k_cache_out"), _binding("x", shape=(1, 4))])),
    )
    add(
        "duplicate_input_name",
        _raw_blob(
            _meta(
                inputs=[
                    _binding("k_cache"),
                    _binding("x", shape=(1, 4)),
                    _binding("x", shape=(1, 4)),
                ]
            )
        ),
    )
    add("alias_output_is_an_input", _raw_blob(_meta(aliased_io=[_alias(output="x")])))
    add("alias_output_unknown", _raw_blob(_meta(aliased_io=[_alias(output="nope")])))
    add("alias_input_is_an_output", _raw_blob(_meta(aliased_io=[_alias(input_="y")])))
    add(
        "output_aliased_twice",
        _raw_blob(
            _meta(
                inputs=[_binding("k_cache"), _binding("v_cache"), _binding("pos", "int64", (1,))],
                aliased_io=[_alias(), _alias(input_="v_cache")],
            )
        ),
    )
    add(
        "input_aliased_twice",
        _raw_blob(
            _meta(
                outputs=[_binding("k_cache_out"), _binding("k2")],
                aliased_io=[_alias(), _alias(output="k2")],
            )
        ),
    )
    add("alias_shape_mismatch", _raw_blob(_meta(aliased_io=[_alias(output="y")])))
    add(
        "alias_dtype_mismatch",
        _raw_blob(_meta(outputs=[_binding("k_cache_out", "float16"), _binding("y", shape=(1, 4))])),
    )
    add("user_alias_shape_mismatch", _raw_blob(_meta(aliased_io=[_alias(output="y", kind="user")])))
    # Format version 2: dynamic dimensions (delegate_blob.md "Dynamic dimensions").
    add(
        "ok_v2_dynamic_prefill",
        B.write_blob(B.parse_metadata(json.dumps(_dynamic_meta()).encode(), 0b11, 2), b"PAYLOAD!"),
        "ok",
    )
    add(
        "ok_v2_two_symbols_point_range",
        _v2(
            _dynamic_meta(
                inputs=[
                    _binding("k_cache"),
                    _binding("x", shape=("B", "T", 4)),
                    _binding("pos", "int64", ("T",)),
                ],
                outputs=[_binding("k_cache_out"), _binding("y", shape=("B", "T", 4))],
                symbols=[_symbol(), _symbol("B", 3, 3, 3)],
            )
        ),
        "ok",
    )
    add(
        "ok_v2_min_zero_max_largest",
        _v2(_dynamic_meta(symbols=[_symbol(lo=0, hi=W.MAX_DIMENSION, opt=0)])),
        "ok",
    )
    add("v2_symbols_in_version_1", _raw_blob(_dynamic_meta()))
    add("v1_symbol_name_in_shape", _raw_blob(_dynamic_meta(symbols=[])))
    add("v2_undeclared_symbol", _v2(_dynamic_meta(symbols=[_symbol("S")])))
    add("v2_symbols_not_list", _v2(_dynamic_meta(symbols={"T": [1, 16]})))
    add("v2_symbol_not_object", _v2(_dynamic_meta(symbols=["T"])))
    add("v2_symbol_empty_name", _v2(_dynamic_meta(symbols=[_symbol(), _symbol("")])))
    add(
        "v2_symbol_name_not_string",
        _v2(_dynamic_meta(symbols=[_symbol(), dict(_symbol(), name=5)])),
    )
    add("v2_symbol_declared_twice", _v2(_dynamic_meta(symbols=[_symbol(), _symbol()])))
    add("v2_max_below_min", _v2(_dynamic_meta(symbols=[_symbol(lo=8, hi=4, opt=6)])))
    add("v2_opt_above_max", _v2(_dynamic_meta(symbols=[_symbol(opt=17)])))
    add("v2_opt_below_min", _v2(_dynamic_meta(symbols=[_symbol(lo=2, opt=1)])))
    for field in ("min", "max", "opt"):
        add(
            f"v2_{field}_missing",
            _v2(_dynamic_meta(symbols=[{k: x for k, x in _symbol().items() if k != field}])),
        )
        for label, bad in (
            ("negative", -1),
            ("float", 4.0),
            ("bool", True),
            ("two_to_the_31", W.MAX_DIMENSION + 1),
            ("string", "4"),
        ):
            add(
                f"v2_{field}_{label}", _v2(_dynamic_meta(symbols=[dict(_symbol(), **{field: bad})]))
            )
    add(
        "v2_symbol_only_in_an_output",
        _v2(
            _dynamic_meta(
                outputs=[_binding("k_cache_out"), _binding("y", shape=(1, "S", 4))],
                symbols=[_symbol(), _symbol("S")],
            )
        ),
    )
    add("v2_unused_symbol", _v2(_dynamic_meta(symbols=[_symbol(), _symbol("S")])))
    add(
        "v2_dynamic_aliased_binding",
        _v2(
            _dynamic_meta(
                inputs=[
                    _binding("k_cache", shape=(1, "T", 4)),
                    _binding("x", shape=(1, "T", 4)),
                    _binding("pos", "int64", ("T",)),
                ],
                outputs=[
                    _binding("k_cache_out", shape=(1, "T", 4)),
                    _binding("y", shape=(1, "T", 4)),
                ],
            )
        ),
    )
    add(
        "rank_17",
        _raw_blob(
            _meta(
                inputs=[
                    _binding("k_cache"),
                    _binding("x", shape=[1] * 17),
                    _binding("pos", "int64", (1,)),
                ]
            )
        ),
    )
    return v


def _raw_payload(
    descriptor: Any,
    program: bytes = b"\x11" * 48,
    *,
    version: int = P.VERSION,
    magic: bytes = P.MAGIC,
    program_offset: int | None = None,
) -> bytes:
    desc = descriptor if isinstance(descriptor, bytes) else json.dumps(descriptor).encode()
    aligned = -(-(P.HEADER_SIZE + len(desc)) // P.PROGRAM_ALIGNMENT) * P.PROGRAM_ALIGNMENT
    offset = aligned if program_offset is None else program_offset
    head = bytearray(P.HEADER_SIZE)
    head[:4] = magic
    struct.pack_into("<I", head, P.HEADER_OFFSETS["version"], version)
    struct.pack_into("<Q", head, P.HEADER_OFFSETS["descriptor_size"], len(desc))
    struct.pack_into("<Q", head, P.HEADER_OFFSETS["program_offset"], offset)
    struct.pack_into("<Q", head, P.HEADER_OFFSETS["program_size"], len(program))
    body = bytes(head) + desc
    return body + b"\0" * max(0, offset - len(body)) + program


def payload_summary(parsed: P.PortablePayload) -> dict[str, Any]:
    """What both readers must agree on for a payload that parses (the C++ reader's summary in
    tests/cpp/conformance_test.cpp)."""
    return {**parsed.descriptor.to_json(), "program_size": len(parsed.program)}


def payload_vectors() -> list[dict[str, Any]]:
    v: list[dict[str, Any]] = []

    def add(name, data, expect="invalid"):
        entry = {"name": name, "reader": "payload", "hex": data.hex(), "expect": expect}
        if expect == "ok":
            entry["summary"] = payload_summary(P.read_portable_payload(data))
        v.append(entry)

    desc = {"inputs": ["x", "pos", "k_cache"], "outputs": ["y", "k_cache_out"]}
    good = P.write_portable_payload(
        P.PortableDescriptor(tuple(desc["inputs"]), tuple(desc["outputs"])), b"\x11" * 48
    )
    add("ok_written_by_exporter", good, "ok")
    add("ok_empty_program_and_no_bindings", _raw_payload({"inputs": [], "outputs": []}, b""), "ok")
    add("short_31_bytes", good[:31])
    add("wrong_magic", _raw_payload(desc, magic=b"ETPX"))
    add("version_1", _raw_payload(desc, version=1), "incompatible")
    add("version_4", _raw_payload(desc, version=4), "incompatible")
    add("ok_version_2_without_constants", _raw_payload(desc, version=2), "ok")
    const = {"key": "w", "scalar_type": 6, "sizes": [2, 3], "dim_order": [0, 1]}
    add(
        "ok_constants",
        _raw_payload(
            dict(
                desc,
                constants=[
                    const,
                    {"key": "e", "scalar_type": 4, "sizes": [], "dim_order": []},
                    {"key": "t", "scalar_type": 11, "sizes": [3, 0, 2], "dim_order": [2, 0, 1]},
                ],
            )
        ),
        "ok",
    )
    add("version_2_with_constants", _raw_payload(dict(desc, constants=[const]), version=2))
    add("constants_not_list", _raw_payload(dict(desc, constants=const)))
    for name, change in (
        ("key_missing", {"key": None}),
        ("key_empty", {"key": ""}),
        ("key_not_string", {"key": 3}),
        ("scalar_type_unknown", {"scalar_type": 99}),
        ("scalar_type_negative", {"scalar_type": -1}),
        ("scalar_type_not_int", {"scalar_type": "float"}),
        ("size_negative", {"sizes": [2, -3]}),
        ("size_over_int32", {"sizes": [2, 2**31]}),
        ("size_not_int", {"sizes": [2, 3.5]}),
        ("dim_order_repeats", {"dim_order": [0, 0]}),
        ("dim_order_out_of_range", {"dim_order": [0, 2]}),
        ("dim_order_shorter", {"dim_order": [0]}),
        ("rank_17", {"sizes": [1] * 17, "dim_order": list(range(17))}),
        ("extra_field", {"nbytes": 24}),
    ):
        entry = {k: x for k, x in {**const, **change}.items() if x is not None}
        add(f"constant_{name}", _raw_payload(dict(desc, constants=[entry])))
    add("constant_key_repeated", _raw_payload(dict(desc, constants=[const, const])))
    add("program_past_end", good[:-1])
    add("program_overlaps_descriptor", _raw_payload(desc, program_offset=P.HEADER_SIZE))
    add("program_misaligned", _raw_payload(desc, program_offset=len(json.dumps(desc)) + 40))
    add("descriptor_past_end", _raw_payload(desc)[: P.HEADER_SIZE + 10])
    add("descriptor_not_json", _raw_payload(b"not json"))
    add("descriptor_not_object", _raw_payload([desc]))
    add("outputs_missing", _raw_payload({"inputs": ["x"]}))
    add("inputs_not_list", _raw_payload({"inputs": "x", "outputs": []}))
    add("name_empty", _raw_payload({"inputs": [""], "outputs": []}))
    add("name_not_string", _raw_payload({"inputs": [1], "outputs": []}))
    add(
        "name_repeated_across_inputs_and_outputs", _raw_payload({"inputs": ["x"], "outputs": ["x"]})
    )
    add("version_1_aliases_key", _raw_payload(dict(desc, aliases={"k_cache_out": "k_cache"})))
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write vectors.json")
    args = parser.parse_args()
    vectors = blob_vectors() + payload_vectors()
    names = [x["name"] + "/" + x["reader"] for x in vectors]
    assert len(set(names)) == len(names), "vector names must be unique per reader"
    doc = {
        "about": "bytes -> expected outcome for the blob and portable payload readers; "
        "generated by tests/conformance/make_vectors.py",
        "vectors": vectors,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(vectors)} vectors to {args.out}")


if __name__ == "__main__":
    main()
