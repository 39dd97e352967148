"""Blob and portable-payload writer/reader: round trip and fail-closed parsing."""

import json
import struct

from absl.testing import absltest

from executorch_trt.format import blob as B
from executorch_trt.format import portable_payload as P
from executorch_trt.format import wire as W


def _metadata(**overrides):
    fields = dict(
        engine="portable",
        inputs=(B.Binding("x", "float32", (1, 4)), B.Binding("k_cache", "float32", (1, 8, 4))),
        outputs=(B.Binding("k_cache_out", "float32", (1, 8, 4)), B.Binding("y", "float32", (1, 4))),
        aliased_io=(B.AliasedIO("k_cache_out", "k_cache", "kv_cache_update", "caller"),),
    )
    fields.update(overrides)
    return B.DelegateMetadata(**fields)


def _raw_blob(
    meta_obj,
    payload=b"PAYLOAD",
    *,
    features=3,
    version=1,
    magic=b"ETRT",
    header_size=64,
    reserved=0,
):
    """A blob as an older writer wrote it (no CHECKSUM unless ``features`` has the bit)."""
    meta = meta_obj if isinstance(meta_obj, bytes) else json.dumps(meta_obj).encode()
    p_off = (64 + len(meta) + 15) // 16 * 16
    body = meta + b"\0" * (p_off - 64 - len(meta)) + payload
    checksum = B.checksum(body) if features & W.Feature.CHECKSUM else 0
    header = struct.pack(
        "<4sIIIQQQQQQ",
        magic,
        header_size,
        version,
        reserved,
        features,
        64,
        len(meta),
        p_off,
        len(payload),
        checksum,
    )
    return header + body


def _reseal(data):
    """Recomputes the checksum of a blob laid out as ``write_blob`` does (metadata at 64,
    payload last)."""
    data = bytearray(data)
    struct.pack_into("<Q", data, W.BLOB_CHECKSUM_OFFSET, B.checksum(bytes(data[64:])))
    return bytes(data)


class BlobRoundTripTest(absltest.TestCase):
    def test_round_trip(self):
        meta = _metadata()
        data = B.write_blob(meta, b"\x01\x02payload")
        parsed = B.read_blob(data)
        self.assertEqual(parsed.metadata, meta)
        self.assertEqual(parsed.payload, b"\x01\x02payload")
        self.assertEqual(
            parsed.header.required_features,
            int(W.Feature.ALIASED_IO | W.Feature.OWNERSHIP | W.Feature.CHECKSUM),
        )
        self.assertEqual(parsed.header.checksum, B.checksum(data[64:]))
        self.assertEqual(struct.unpack_from("<Q", data, 56)[0], parsed.header.checksum)
        self.assertEqual(parsed.header.payload_offset % 16, 0)
        self.assertEqual(data[:4], b"ETRT")
        self.assertEqual(struct.unpack_from("<II", data, 4), (64, 1))

    def test_no_aliases_only_checksum_feature(self):
        data = B.write_blob(_metadata(aliased_io=()), b"")
        self.assertEqual(B.read_blob(data).header.required_features, int(W.Feature.CHECKSUM))

    def test_alias_positions(self):
        self.assertEqual(_metadata().aliased_output_to_input(), {0: 1})

    def test_missing_kind_means_kv_cache_update(self):
        obj = _metadata().to_json()
        del obj["aliased_io"][0]["kind"]
        parsed = B.read_blob(_raw_blob(obj))
        self.assertEqual(parsed.metadata.aliased_io[0].kind, "kv_cache_update")


class BlobFailClosedTest(absltest.TestCase):
    def assertRejected(self, data, message):
        with self.assertRaisesRegex(ValueError, message):
            B.read_blob(data)

    def test_short(self):
        self.assertRejected(b"ETRT", "shorter than the 64-byte header")

    def test_wrong_magic(self):
        self.assertRejected(_raw_blob(_metadata().to_json(), magic=b"TR01"), "wrong magic")

    def test_newer_and_older_version(self):
        self.assertRejected(_raw_blob(_metadata().to_json(), version=3), "format_version 3")
        self.assertRejected(_raw_blob(_metadata().to_json(), version=0), "format_version 0")

    def test_unknown_feature_bit(self):
        self.assertRejected(_raw_blob(_metadata().to_json(), features=3 | 8), "unknown bits 0x8")

    def test_small_header_size(self):
        self.assertRejected(_raw_blob(_metadata().to_json(), header_size=32), "header_size 32")

    def test_truncated_payload(self):
        data = B.write_blob(_metadata(), b"0123456789")
        self.assertRejected(data[:-1], "payload .* past the end")

    def test_overflowing_offset(self):
        data = bytearray(B.write_blob(_metadata(), b"xx"))
        struct.pack_into("<Q", data, 40, (1 << 64) - 16)
        self.assertRejected(bytes(data), "payload .* past the end")

    def test_metadata_not_json(self):
        data = bytearray(B.write_blob(_metadata(), b""))
        data[64] = ord("!")
        self.assertRejected(_reseal(data), "not UTF-8 JSON")

    def test_nonzero_reserved_field(self):
        self.assertRejected(
            _raw_blob(_metadata().to_json(), reserved=1),
            "reserved field at offset 12 is 0x00000001",
        )

    def test_missing_inputs(self):
        obj = _metadata().to_json()
        del obj["inputs"]
        self.assertRejected(_raw_blob(obj), "no 'inputs'")

    def test_unknown_kind(self):
        obj = _metadata().to_json()
        obj["aliased_io"][0]["kind"] = "kv_cache_updte"
        self.assertRejected(_raw_blob(obj), "'k_cache_out' has unknown kind 'kv_cache_updte'")

    def test_unknown_ownership(self):
        obj = _metadata().to_json()
        obj["aliased_io"][0]["ownership"] = "delegate"
        self.assertRejected(_raw_blob(obj), "unknown ownership 'delegate'")

    def test_alias_to_non_binding(self):
        obj = _metadata().to_json()
        obj["aliased_io"][0]["input"] = "v_cache"
        self.assertRejected(_raw_blob(obj), "names input 'v_cache', which is not an input binding")
        obj = _metadata().to_json()
        obj["aliased_io"][0]["output"] = "nope"
        self.assertRejected(_raw_blob(obj), "aliased output 'nope' is not an output binding")

    def test_alias_shape_mismatch(self):
        obj = _metadata().to_json()
        obj["outputs"][0]["shape"] = [1, 9, 4]
        self.assertRejected(_raw_blob(obj), "'k_cache_out' .* does not match input 'k_cache'")

    def test_missing_ownership(self):
        obj = _metadata().to_json()
        del obj["aliased_io"][0]["ownership"]
        self.assertRejected(_raw_blob(obj), "no 'ownership' although the blob requires")
        parsed = B.read_blob(_raw_blob(obj, features=int(W.Feature.ALIASED_IO)))
        self.assertEqual(parsed.metadata.aliased_io[0].ownership, "caller")

    def test_aliases_without_feature_bit(self):
        self.assertRejected(_raw_blob(_metadata().to_json(), features=0), "lacks ALIASED_IO")

    def test_unknown_dtype_and_engine(self):
        obj = _metadata().to_json()
        obj["inputs"][0]["dtype"] = "complex64"
        self.assertRejected(_raw_blob(obj), "binding 'x' has unknown dtype 'complex64'")
        obj = _metadata().to_json()
        obj["engine"] = "cuda"
        self.assertRejected(_raw_blob(obj), "unknown engine 'cuda'")

    def test_section_overlapping_the_header(self):
        # C++ SectionFits: sections start at or after header_size.
        self.assertRejected(
            _raw_blob(_metadata().to_json(), header_size=80),
            "metadata_offset 64 overlaps the 80-byte header",
        )
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        struct.pack_into("<Q", data, 40, 48)
        self.assertRejected(bytes(data), "payload_offset 48 overlaps the 64-byte header")

    def test_header_size_past_the_end(self):
        self.assertRejected(
            _raw_blob(_metadata().to_json(), header_size=1 << 20), "header_size 1048576 is not in"
        )

    def test_dimension_cap(self):
        # C++ DelegateMetadata::Parse: dimensions are integers in [0, 2^31).
        obj = _metadata(aliased_io=()).to_json()
        obj["inputs"][0]["shape"] = [1, (1 << 31) - 1]
        self.assertEqual(B.read_blob(_raw_blob(obj)).metadata.inputs[0].shape, (1, (1 << 31) - 1))
        for bad in (1 << 31, -1, 2.0, True):
            obj["inputs"][0]["shape"] = [1, bad]
            with self.subTest(dim=bad):
                self.assertRejected(_raw_blob(obj), r"invalid shape .*\[0, 2\^31\)")

    def test_binding_names_unique_over_inputs_and_outputs(self):
        # C++ BindingPlan::Create: one name space for all delegate arguments.
        obj = _metadata(aliased_io=()).to_json()
        obj["outputs"][1]["name"] = "x"
        self.assertRejected(_raw_blob(obj), "duplicate binding name 'x'")

    def test_one_input_aliased_by_two_outputs(self):
        obj = _metadata().to_json()
        obj["outputs"][1] = {"name": "y", "dtype": "float32", "shape": [1, 8, 4]}
        obj["aliased_io"].append(
            {"output": "y", "input": "k_cache", "kind": "user", "ownership": "caller"}
        )
        self.assertRejected(_raw_blob(obj), "input 'k_cache' is aliased by two outputs")

    def test_json_as_the_runtime_parses_it(self):
        # nlohmann::json: no NaN/Infinity, no unpaired surrogates; a leading BOM is skipped.
        meta = json.dumps(_metadata().to_json()).encode()
        self.assertEqual(B.read_blob(_raw_blob(b"\xef\xbb\xbf" + meta)).metadata, _metadata())
        self.assertRejected(_raw_blob(meta[:-1] + b',"extra":NaN}'), "not UTF-8 JSON")
        self.assertRejected(_raw_blob(meta.replace(b'"x"', b'"\\ud800"')), "not UTF-8 JSON")
        self.assertRejected(_raw_blob(meta + b"\0"), "not UTF-8 JSON")

    def test_read_metadata_skips_only_the_checksum(self):
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        data[-1] ^= 0x01
        self.assertEqual(B.read_metadata(bytes(data)), _metadata())
        with self.assertRaisesRegex(ValueError, "checksum mismatch"):
            B.read_blob(bytes(data))
        with self.assertRaisesRegex(ValueError, "wrong magic"):
            B.read_metadata(b"XXXX" + bytes(data[4:]))

    def test_writer_refuses_invalid_metadata(self):
        bad = _metadata(aliased_io=(B.AliasedIO("k_cache_out", "k_cache", "magic", "caller"),))
        with self.assertRaisesRegex(ValueError, "unknown kind 'magic'"):
            B.write_blob(bad, b"")


class BlobChecksumTest(absltest.TestCase):
    def assertCorrupted(self, data):
        with self.assertRaisesRegex(ValueError, "the blob is corrupted; re-export"):
            B.read_blob(bytes(data))

    def test_test_vectors(self):
        # docs/formats/delegate_blob.md "Integrity"; the same values are checked in C++
        # (blob_header_test).
        self.assertEqual(B.checksum(b""), 0xB4B2797457A0A6E4)
        self.assertEqual(B.checksum(b"abc"), 0x5995D533D814BBD8)
        self.assertEqual(B.checksum(bytes(range(256)) * 3 + b"x"), 0x92D9FB6CB9808899)

    def test_flipped_payload_byte(self):
        data = bytearray(B.write_blob(_metadata(), b"0123456789" * 10))
        data[-5] ^= 0x01
        with self.assertRaisesRegex(
            ValueError,
            r"checksum mismatch .*expected 0x[0-9a-f]{16} "
            r"\(stored in the header\), actual 0x[0-9a-f]{16}",
        ):
            B.read_blob(bytes(data))

    def test_flipped_metadata_byte(self):
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        data[80] ^= 0x20  # "portable" -> "portaBle": checked before the JSON is read
        self.assertCorrupted(data)

    def test_every_changed_byte_after_the_header(self):
        data = B.write_blob(_metadata(), b"payload-bytes")
        for at in range(64, len(data)):
            for flip in (0x01, 0x80):
                bad = bytearray(data)
                bad[at] ^= flip
                with self.subTest(at=at, flip=flip):
                    self.assertCorrupted(bad)

    def test_changed_checksum_field(self):
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        data[60] ^= 0x01
        self.assertCorrupted(data)

    def test_clearing_the_bit_does_not_disable_the_check(self):
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        struct.pack_into("<Q", data, 16, int(W.Feature.ALIASED_IO | W.Feature.OWNERSHIP))
        with self.assertRaisesRegex(ValueError, "lacks the CHECKSUM bit"):
            B.read_blob(bytes(data))

    def test_older_blobs_without_the_bit_still_read(self):
        data = _raw_blob(_metadata().to_json(), b"payload")
        parsed = B.read_blob(data)
        self.assertEqual(parsed.header.checksum, 0)
        self.assertEqual(parsed.payload, b"payload")
        # And a checksummed raw blob from another writer reads too.
        sealed = _raw_blob(_metadata().to_json(), b"payload", features=7)
        self.assertEqual(B.read_blob(sealed).payload, b"payload")

    def test_metadata_running_into_the_payload(self):
        data = bytearray(B.write_blob(_metadata(), b"payload"))
        p_off = struct.unpack_from("<Q", data, 40)[0]
        struct.pack_into("<Q", data, 32, p_off - 64 + 1)
        with self.assertRaisesRegex(ValueError, "does not end before the payload"):
            B.read_blob(bytes(data))

    def test_writer_output_is_deterministic(self):
        self.assertEqual(B.write_blob(_metadata(), b"p"), B.write_blob(_metadata(), b"p"))


class PortablePayloadTest(absltest.TestCase):
    def _descriptor(self):
        return P.PortableDescriptor(("x", "k_cache"), ("k_cache_out", "y"))

    def test_round_trip(self):
        data = P.write_portable_payload(self._descriptor(), b"PTE-BYTES")
        parsed = P.read_portable_payload(data)
        self.assertEqual(parsed.descriptor, self._descriptor())
        self.assertEqual(parsed.program, b"PTE-BYTES")
        self.assertEqual(data[:4], b"ETPE")
        _, _, _, off, size = struct.unpack_from("<4sIQQQ", data)
        self.assertEqual(off % 16, 0)
        self.assertEqual(size, 9)

    def test_fail_closed(self):
        data = P.write_portable_payload(self._descriptor(), b"PTE-BYTES")
        with self.assertRaisesRegex(ValueError, "wrong magic"):
            P.read_portable_payload(b"XXXX" + data[4:])
        with self.assertRaisesRegex(ValueError, "version 1 is not supported"):
            P.read_portable_payload(data[:4] + struct.pack("<I", 1) + data[8:])
        with self.assertRaisesRegex(ValueError, "program lies past the end"):
            P.read_portable_payload(data[:-1])
        with self.assertRaisesRegex(ValueError, "shorter than the 32-byte header"):
            P.read_portable_payload(data[:8])
        bad = P.PortableDescriptor(("x",), ("x",))
        with self.assertRaisesRegex(ValueError, "names binding 'x' twice"):
            P.write_portable_payload(bad, b"")


if __name__ == "__main__":
    absltest.main()
