"""Generates the test data for the C++ end-to-end backend test.

Writes, into the output directory:
  nested_kv.pte   the partition as a plain ExecuTorch program (the portable engine's
                  nested program), exported with alloc_graph_input=False and
                  alloc_graph_output=False; uses executorch_trt::kv_cache_update.out.
  kv_blob.bin     a delegate blob (docs/formats/delegate_blob.md) with "engine": "portable" around
                  nested_kv.pte (docs/formats/portable_payload.md), with the CHECKSUM
                  feature (BLAKE2b-64 over metadata, padding and payload).
  outer_kv.pte    a program whose whole forward is one "TensorRTBackend" delegate call
                  carrying kv_blob.bin.

Delegate argument order deliberately differs from engine binding order, so the
C++ side must map by name:
  engine   inputs  [x, pos, k_cache]   outputs [y, k_cache_out]
  delegate inputs  [k_cache, x, pos]   outputs [k_cache_out, y]

Model (float32, k_cache [1, 8, 4]):
  v = (x * 2 + 1).reshape(1, 1, 4)
  k_cache_out = kv_cache_update(k_cache, v, pos, dim=1)   # index_copy along dim 1
  y = k_cache_out.sum(dim=1)                               # [1, 4]

This script is self-contained (it defines the op schema it needs); it must not depend on
the Python package under py/.

Usage: python make_kv_testdata.py --nested PATH --blob PATH --outer PATH
       python make_kv_testdata.py OUT_DIR      (all three, with the names above)
"""

import argparse
import hashlib
import json
import os
import struct
import sys

import torch

# ---- the custom op (schema shared with core/kernels/kv_cache_update.cpp) -------------
_LIB = torch.library.Library("executorch_trt", "FRAGMENT")
_LIB.define("kv_cache_update(Tensor cache, Tensor value, Tensor indices, int dim) -> Tensor")
_LIB.define(
    "kv_cache_update.out(Tensor cache, Tensor value, Tensor indices, int dim, *, "
    "Tensor(a!) out) -> Tensor(a!)"
)


def _kv_impl(cache, value, indices, dim):
    return cache.index_copy(dim, indices.to(torch.int64), value)


def _kv_out_impl(cache, value, indices, dim, *, out):
    out.copy_(cache.index_copy(dim, indices.to(torch.int64), value))
    return out


_LIB.impl("kv_cache_update", _kv_impl, "CompositeExplicitAutograd")
_LIB.impl("kv_cache_update", lambda c, v, i, d: torch.empty_like(c), "Meta")
_LIB.impl("kv_cache_update.out", _kv_out_impl, "CompositeExplicitAutograd")
_LIB.impl("kv_cache_update.out", lambda c, v, i, d, *, out: out, "Meta")

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge  # noqa: E402
from executorch.exir.backend.backend_api import to_backend  # noqa: E402
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult  # noqa: E402
from executorch.exir.passes import MemoryPlanningPass  # noqa: E402

CACHE_SHAPE = (1, 8, 4)


def _step(x, pos, k_cache):
    v = (x * 2 + 1).reshape(1, 1, 4)
    k_new = torch.ops.executorch_trt.kv_cache_update(k_cache, v, pos, 1)
    return k_new.sum(dim=1), k_new


class Nested(torch.nn.Module):  # engine order
    def forward(self, x, pos, k_cache):
        y, k_new = _step(x, pos, k_cache)
        return y, k_new


class Outer(torch.nn.Module):  # delegate order
    def forward(self, k_cache, x, pos):
        y, k_new = _step(x, pos, k_cache)
        return k_new, y


def _example():
    return (torch.randn(1, 4), torch.tensor([3], dtype=torch.int64), torch.zeros(CACHE_SHAPE))


_EDGE = EdgeCompileConfig(_check_ir_validity=False)


def make_nested_pte() -> bytes:
    x, pos, k = _example()
    with torch.no_grad():
        ep = torch.export.export(Nested(), (x, pos, k))
        prog = to_edge(ep, compile_config=_EDGE).to_executorch(
            ExecutorchBackendConfig(
                memory_planning_pass=MemoryPlanningPass(
                    alloc_graph_input=False, alloc_graph_output=False
                )
            )
        )
    return prog.buffer


def _align(n, a=16):
    return (n + a - 1) // a * a


def make_portable_payload(pte: bytes, descriptor: dict) -> bytes:
    desc = json.dumps(descriptor).encode()
    program_offset = _align(32 + len(desc))
    head = b"ETPE" + struct.pack("<IQQQ", 2, len(desc), program_offset, len(pte))
    body = head + desc
    return body + b"\0" * (program_offset - len(body)) + pte


def make_blob(metadata: dict, payload: bytes, features: int = 0b111) -> bytes:
    meta = json.dumps(metadata).encode()
    metadata_offset = 64
    payload_offset = _align(metadata_offset + len(meta))
    body = meta + b"\0" * (payload_offset - metadata_offset - len(meta)) + payload
    checksum = 0
    if features & 0b100:  # CHECKSUM: BLAKE2b-64 of [metadata_offset, end of payload)
        checksum = int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little")
    head = b"ETRT" + struct.pack(
        "<IIIQQQQQQ",
        64,
        1,
        0,
        features,
        metadata_offset,
        len(meta),
        payload_offset,
        len(payload),
        checksum,
    )
    assert len(head) == 64
    return head + body


def _b(name, dtype, shape):
    return {"name": name, "dtype": dtype, "shape": list(shape)}


METADATA = {
    "engine": "portable",
    "inputs": [
        _b("k_cache", "float32", CACHE_SHAPE),
        _b("x", "float32", (1, 4)),
        _b("pos", "int64", (1,)),
    ],
    "outputs": [_b("k_cache_out", "float32", CACHE_SHAPE), _b("y", "float32", (1, 4))],
    "aliased_io": [
        {
            "output": "k_cache_out",
            "input": "k_cache",
            "kind": "kv_cache_update",
            "ownership": "caller",
        }
    ],
}
DESCRIPTOR = {
    "inputs": ["x", "pos", "k_cache"],
    "outputs": ["y", "k_cache_out"],
}

_BLOB = {}


class TensorRTBackend(BackendDetails):  # name == runtime backend id
    @staticmethod
    def preprocess(edge_program, compile_specs):
        return PreprocessResult(processed_bytes=_BLOB["bytes"])


def make_outer_pte(blob: bytes) -> bytes:
    _BLOB["bytes"] = blob
    with torch.no_grad():
        x, pos, k = _example()
        ep = torch.export.export(Outer(), (k, x, pos))
        edge = to_edge(ep, compile_config=_EDGE)
        lowered = to_backend("TensorRTBackend", edge.exported_program(), [])

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lowered = lowered

            def forward(self, k_cache, x, pos):
                return self.lowered(k_cache, x, pos)

        ep2 = torch.export.export(Wrap(), (k, x, pos))
        prog = to_edge(ep2, compile_config=_EDGE).to_executorch()
    return prog.buffer


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", help="write all three files here")
    parser.add_argument("--nested", help="path of nested_kv.pte")
    parser.add_argument("--blob", help="path of kv_blob.bin")
    parser.add_argument("--outer", help="path of outer_kv.pte")
    args = parser.parse_args(argv[1:])
    paths = {
        "nested": args.nested or os.path.join(args.out_dir or ".", "nested_kv.pte"),
        "blob": args.blob or os.path.join(args.out_dir or ".", "kv_blob.bin"),
        "outer": args.outer or os.path.join(args.out_dir or ".", "outer_kv.pte"),
    }
    torch.manual_seed(0)
    nested = make_nested_pte()
    blob = make_blob(METADATA, make_portable_payload(nested, DESCRIPTOR))
    outer = make_outer_pte(blob)
    for key, data in (("nested", nested), ("blob", blob), ("outer", outer)):
        os.makedirs(os.path.dirname(os.path.abspath(paths[key])), exist_ok=True)
        with open(paths[key], "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv)
