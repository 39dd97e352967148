"""The worker of ``load_fuzz_test``: loads and executes mutated programs through the Python
runtime, one after another, in one process.

``python load_fuzz_worker.py BASE.pte SEED FIRST COUNT``: for i in [FIRST, FIRST + COUNT) it
builds mutation ``i`` of BASE.pte (``mutate``: a few bytes of the delegate blob's metadata or
payload changed in place, the blob checksum recomputed, so the bytes reach the parsers behind
it), then ``runtime.load(...).load_method("forward").execute(inputs)`` once. It prints
``S i`` before and ``R i ok`` / ``R i error`` after each (flushed), so the parent knows which
input a process that died by a signal was running. An exception (a load or execute error) is
an expected outcome. An input still running after ``HANG_S`` seconds dumps the Python stacks
and exits (faulthandler), which the parent reports as a hang of that input.
"""

import faulthandler
import random
import sys

import torch

HANG_S = 20

#: The inputs of ``load_fuzz_test.CacheWriter``: x [1, 1, 8] float32, pos [1] int64.
INPUTS = [torch.ones(1, 1, 8), torch.tensor([2])]

_INTERESTING = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0x02, 0x10, 0x20, 0x40]


def _blob_region(pte: bytes):
    """(blob start, metadata slice, payload slice) of the first delegate blob in ``pte``."""
    from executorch_trt.format import blob
    from executorch_trt.format.wire import BLOB_MAGIC

    start = pte.find(BLOB_MAGIC)
    if start < 0:
        raise ValueError("no delegate blob in the program")
    h = blob.read_header(pte[start:])
    return (
        start,
        slice(start + h.metadata_offset, start + h.metadata_offset + h.metadata_size),
        slice(start + h.payload_offset, start + h.payload_offset + h.payload_size),
    )


def mutate(pte: bytes, seed: int, index: int) -> bytes:
    """Mutation ``index`` of ``pte`` under ``seed`` (deterministic): one to three windows of 1
    to 16 bytes, in the metadata (one time in three) or the payload, each byte replaced by a
    random or an edge value, or a little-endian int32 set to an edge value; then the blob's
    checksum recomputed (docs/formats/delegate_blob.md "Integrity")."""
    from executorch_trt.format import blob
    from executorch_trt.format.wire import BLOB_CHECKSUM_OFFSET

    rng = random.Random(seed * 1_000_003 + index)
    start, metadata, payload = _blob_region(pte)
    out = bytearray(pte)
    for _ in range(rng.randint(1, 3)):
        region = metadata if rng.randrange(3) == 0 else payload
        size = region.stop - region.start
        width = min(size, rng.randint(1, 16))
        at = region.start + rng.randrange(size - width + 1)
        kind = rng.randrange(3)
        if kind == 0:
            for k in range(width):
                out[at + k] = rng.randrange(256)
        elif kind == 1:
            out[at + rng.randrange(width)] = rng.choice(_INTERESTING)
        elif width >= 4:
            value = rng.choice([0, 1, -1, 2, 3, 0x7FFFFFFF, -0x80000000, 0x10000, 255])
            k = rng.randrange(width - 3)
            out[at + k : at + k + 4] = value.to_bytes(4, "little", signed=True)
        else:
            out[at] ^= 1 << rng.randrange(8)
    end = payload.stop
    digest = blob.checksum(bytes(out[metadata.start : end]))
    out[start + BLOB_CHECKSUM_OFFSET : start + BLOB_CHECKSUM_OFFSET + 8] = digest.to_bytes(
        8, "little"
    )
    return bytes(out)


def main(base_path: str, seed: int, first: int, count: int) -> int:
    from executorch_trt import runtime

    with open(base_path, "rb") as f:
        base = f.read()
    for i in range(first, first + count):
        pte = mutate(base, seed, i)
        print(f"S {i}", flush=True)
        faulthandler.dump_traceback_later(HANG_S, exit=True)
        try:
            runtime.load(pte).load_method("forward").execute(INPUTS)
            outcome = "ok"
        except Exception:  # noqa: BLE001 (a rejected input is an expected outcome)
            outcome = "error"
        faulthandler.cancel_dump_traceback_later()
        print(f"R {i} {outcome}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
