"""What conversations cost on the benchmark's decoder: prefix reuse, rewind, fork, save and load.

    ./bazelw run //benchmarks:sessions -- [--out DIR] [--repeats N] [--threads N] [--quick]

The seeded decoder of the decode benchmark (`bench_config.FULL_DIMS`, float32) is exported with
`executorch_trt.llm.export_llm` (one dynamic `forward`, the metadata methods; `portable`
engine, on the CPU) with a cache of `capacity` positions, and loaded with
`executorch_trt.llm.load`. Measured, each the median of `--repeats` runs after one warm-up:

* **time to first token with the prefix cache**: a first session prefills a `shared`-token
  prompt plus `tail` tokens of its own (nothing cached: the whole prompt runs), a second one
  the same shared prompt plus other tail tokens (the shared part is copied from the cache);
  each is the `prefill` call, whose logits give the first token. The cache is emptied before
  each pair. The ratio second / first is the target (<= 0.2).
* **rewind and fork** of a session holding `held` tokens, against copying the state those
  tokens use (`layout.held_bytes(held)` bytes, one `copy_` per buffer into preallocated
  tensors: the floor for any copy of the held positions), and against the same copy into a
  newly allocated zeroed state of the full capacity (what a fork, which owns new tensors, must
  do at least). Rewind copies nothing.
* **save and load** of that session: the file's size, `save` and `load_session` times.

The table goes to stdout and `sessions.json` to `--out`. `--quick` runs the benchmark's toy
model with small sizes (a test checks the output's structure and byte counts, never timings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from benchmarks.bench_config import FULL_DIMS, QUICK_DIMS, ModelDims

FULL = dict(dims=FULL_DIMS, capacity=2048, max_seq_len=512, shared=512, tail=8, held=1024)
QUICK = dict(dims=QUICK_DIMS, capacity=64, max_seq_len=16, shared=16, tail=2, held=32)


def _export(dims: ModelDims, capacity: int, max_seq_len: int, path: str) -> None:
    from decoder_model import build_model
    from executorch_trt import llm

    model = build_model(capacity, **{k: getattr(dims, k) for k in dims.__dataclass_fields__})
    llm.export_llm(model, max_seq_len, max_context_len=capacity, output=path)


def _median_ms(run: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):  # the first run warms up
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


def _tokens(generator: torch.Generator, n: int, vocab: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=generator).tolist()


def measure(sizes: dict, repeats: int, directory: str) -> dict:
    """Runs every measurement (module docstring); returns the results as a dict."""
    from executorch_trt import inspect, llm

    dims: ModelDims = sizes["dims"]
    pte = os.path.join(directory, "decoder.pte")
    start = time.perf_counter()
    _export(dims, sizes["capacity"], sizes["max_seq_len"], pte)
    export_s = time.perf_counter() - start
    program = llm.load(pte)
    g = torch.Generator().manual_seed(0)
    vocab = dims.vocab_size
    shared = _tokens(g, sizes["shared"], vocab)

    # Prefix reuse: a pair of sessions per repeat, the cache emptied first.
    firsts, seconds, reused = [], [], []
    for _ in range(repeats + 1):
        cache = program.prefix_cache(max_bytes=1 << 34)
        cache.clear()
        a, b = program.new_session(), program.new_session()
        prompt_a = shared + _tokens(g, sizes["tail"], vocab)
        prompt_b = shared + _tokens(g, sizes["tail"], vocab)
        t0 = time.perf_counter()
        a.prefill(prompt_a)
        t1 = time.perf_counter()
        b.prefill(prompt_b)
        t2 = time.perf_counter()
        firsts.append((t1 - t0) * 1e3)
        seconds.append((t2 - t1) * 1e3)
        reused.append(b.reused_tokens)
    program.prefix_cache(0)
    first_ms, second_ms = statistics.median(firsts[1:]), statistics.median(seconds[1:])

    # Rewind and fork of a session holding `held` tokens.
    held = sizes["held"]
    session = program.new_session()
    for start_at in range(0, held, sizes["max_seq_len"]):
        session.prefill(_tokens(g, min(sizes["max_seq_len"], held - start_at), vocab))
    held_bytes = program.layout.held_bytes(held)
    state = session.state
    targets = {n: torch.empty_like(t) for n, t in state.items()}

    def copy_held() -> None:
        for name, tensor in state.items():
            program.layout.held(name, targets[name], held).copy_(
                program.layout.held(name, tensor, held)
            )

    copy_ms = _median_ms(copy_held, repeats)

    def allocate_and_copy_held() -> None:
        fresh = {n: torch.zeros_like(t) for n, t in state.items()}
        for name, tensor in state.items():
            program.layout.held(name, fresh[name], held).copy_(
                program.layout.held(name, tensor, held)
            )

    allocate_copy_ms = _median_ms(allocate_and_copy_held, repeats)
    fork_positions = session.fork().position
    fork_ms = _median_ms(lambda: session.fork().close(), repeats)

    # Each rewind needs a session at `held` tokens: a fresh fork per run, not timed.
    rewinds = []
    for _ in range(repeats + 1):
        child = session.fork()
        t0 = time.perf_counter()
        child.rewind(held // 2)
        rewinds.append((time.perf_counter() - t0) * 1e3)
    rewind_ms = statistics.median(rewinds[1:])

    # Save and load.
    path = os.path.join(directory, "held.session")
    save_ms = _median_ms(lambda: session.save(path), repeats)
    size = os.path.getsize(path)
    loaded = []
    load_ms = _median_ms(lambda: loaded.append(program.load_session(path)), repeats)
    assert loaded[-1].tokens == session.tokens

    return {
        "model": dims.describe(),
        "engine": inspect(pte).summary.engine_summary,
        "threads": torch.get_num_threads(),
        "capacity": sizes["capacity"],
        "max_seq_len": sizes["max_seq_len"],
        "export_s": export_s,
        "prefix": {
            "shared_tokens": sizes["shared"],
            "tail_tokens": sizes["tail"],
            "reused_tokens": reused[-1],
            "first_ttft_ms": first_ms,
            "second_ttft_ms": second_ms,
            "ratio": second_ms / first_ms,
        },
        "held_tokens": held,
        "held_bytes": held_bytes,
        "copy_held_ms": copy_ms,
        "allocate_and_copy_held_ms": allocate_copy_ms,
        "fork": {
            "ms": fork_ms,
            "positions": fork_positions,
            "vs_copy": fork_ms / copy_ms,
            "vs_allocate_and_copy": fork_ms / allocate_copy_ms,
        },
        "rewind": {"ms": rewind_ms, "to": held // 2, "bytes_copied": 0},
        "session_file": {"bytes": size, "save_ms": save_ms, "load_ms": load_ms},
        "repeats": repeats,
    }


def table(r: dict) -> str:
    p, f, w, s = r["prefix"], r["fork"], r["rewind"], r["session_file"]
    header = (
        f"sessions benchmark: {r['model']}; cache {r['capacity']} positions, "
        f"{r['max_seq_len']} tokens per call; {r['engine']}; {r['threads']} threads; "
        f"median of {r['repeats']}"
    )
    prefix = (
        f"  time to first token, {p['shared_tokens']} shared + {p['tail_tokens']} own prompt "
        f"tokens: first session {p['first_ttft_ms']:.2f} ms, second (reused "
        f"{p['reused_tokens']} from the prefix cache) {p['second_ttft_ms']:.2f} ms: "
        f"{p['ratio']:.3f}x"
    )
    held = (
        f"  session holding {r['held_tokens']} tokens ({r['held_bytes']} bytes of state held): "
        f"copying them {r['copy_held_ms']:.3f} ms (into a new zeroed state "
        f"{r['allocate_and_copy_held_ms']:.3f} ms)"
    )
    fork = (
        f"    fork {f['ms']:.3f} ms ({f['vs_copy']:.2f}x the copy, "
        f"{f['vs_allocate_and_copy']:.2f}x with the new state); rewind to {w['to']} "
        f"{w['ms']:.4f} ms, {w['bytes_copied']} bytes copied"
    )
    saved = f"    save {s['save_ms']:.2f} ms, load {s['load_ms']:.2f} ms, file {s['bytes']} bytes"
    return "\n".join([header, prefix, held, fork, saved])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out",
        help="directory for sessions.json (default: $BUILD_WORKING_DIRECTORY/benchmarks/results)",
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the toy model, small sizes")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        p.error("--repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as directory:
        results = measure(QUICK if args.quick else FULL, args.repeats, directory)
    print(table(results))
    out = args.out or os.path.join(
        os.environ.get("BUILD_WORKING_DIRECTORY", "."), "benchmarks", "results"
    )
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "sessions.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
