"""The Python blob and payload readers against the shared conformance vectors.

tests/conformance/vectors.json (tests/conformance/make_vectors.py) gives bytes and the
outcome the C++ runtime's readers must reach on them (tests/cpp/conformance_test.cpp runs the
same file through BlobHeader::Parse, DelegateMetadata::Parse, BindingPlan::Create and
PortablePayload::Parse). Here: ``blob.read_blob`` and ``read_portable_payload`` must accept
exactly the "ok" vectors, reproduce their summaries, and raise ``ValueError`` on the others.
"""

import json
import os

from absl.testing import absltest

import make_vectors
from executorch_trt.format import blob as B
from executorch_trt.format import portable_payload as P

_VECTORS = os.path.join("tests", "conformance", "vectors.json")


def _load():
    # Under `bazel test` the working directory is the runfiles root; outside, the checkout.
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (_VECTORS, os.path.join(here, "..", "..", _VECTORS)):
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)["vectors"]
    raise FileNotFoundError(f"{_VECTORS} not found (run from the checkout or under Bazel)")


def _summary(reader, data):
    """The summary the vectors record (make_vectors.py), of what the Python reader parsed."""
    if reader == "blob":
        return make_vectors.blob_summary(B.read_blob(data).metadata)
    return make_vectors.payload_summary(P.read_portable_payload(data))


class ConformanceTest(absltest.TestCase):
    def test_vectors_cover_both_readers_and_outcomes(self):
        vectors = _load()
        kinds = {(v["reader"], v["expect"]) for v in vectors}
        for reader in ("blob", "payload"):
            for expect in ("ok", "invalid", "incompatible"):
                self.assertIn((reader, expect), kinds)

    def test_python_readers_reach_the_expected_outcome(self):
        for v in _load():
            with self.subTest(vector=v["name"], reader=v["reader"]):
                data = bytes.fromhex(v["hex"])
                if v["expect"] == "ok":
                    self.assertEqual(_summary(v["reader"], data), v["summary"])
                else:
                    with self.assertRaises(ValueError):
                        _summary(v["reader"], data)


if __name__ == "__main__":
    absltest.main()
