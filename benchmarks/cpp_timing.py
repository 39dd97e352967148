"""The C++ timing of the delegate's decode step: runs `decode_step_cpp` (decode_step_cpp.cpp,
`//benchmarks:decode_step_cpp`) on a built program, so the delegate's step time is also
measured without the Python runtime in the process.

The binary loads the `.pte` with the runner's `PrefillDecodeProgram` (examples/), binds every
KV cache to memory it owns, fills the cache as the timing worker does (`measure.fill_cache`:
chunks of `prompt_len` positions over the whole capacity, then the prompt; a chunk that does
not start at 0 runs as decode steps, one per position, which writes the same keys and values
up to float rounding), runs `warmup` decode steps, then times `repeats` decode steps of
`workload.DECODE_TOKEN` at position `prompt_len` with `std::chrono::steady_clock`. It runs after the
timing worker of the capacity, in a process of its own: its numbers are not paired with the Python
rounds.
"""

from __future__ import annotations

import json
import math
import os
import subprocess

from benchmarks import workload
from benchmarks.bench_config import BenchConfig
from benchmarks.command_line import tail
from benchmarks.variants import BuiltProgram

#: The variants decode.py times in C++ as well (their rows get the `step_ms_cpp_*` fields).
CPP_VARIANTS = ("delegate_inplace",)
BINARY_ENV = "EXECUTORCH_TRT_DECODE_STEP_CPP"
RUNFILES_PATH = "executorch_trt/benchmarks/decode_step_cpp"
TIMEOUT_S = 900
DESCRIPTION = (
    "delegate_inplace also timed in C++ (decode_step_cpp: the runner's "
    "PrefillDecodeProgram, caller-owned caches, std::chrono::steady_clock), in a "
    "process of its own after the timing worker"
)


class BinaryNotFoundError(RuntimeError):
    """decode_step_cpp could not be located (see `binary_path`)."""


def binary_path() -> str:
    """Where decode_step_cpp is: `$EXECUTORCH_TRT_DECODE_STEP_CPP` (must name a file), else
    Bazel runfiles (decode_lib's data: `bazel run //benchmarks:decode`, the tests), else next
    to the delegate library Bazel built (`<bazel-bin>/benchmarks/` for
    `<bazel-bin>/core/libexecutorch_trt.so`). Raises BinaryNotFoundError saying how to build
    it otherwise."""
    env = os.environ.get(BINARY_ENV)
    if env:
        if not os.path.isfile(env):
            raise BinaryNotFoundError(f"${BINARY_ENV}={env!r} does not name a file")
        return env
    from executorch_trt.runtime.library import runfiles_location

    found = runfiles_location(RUNFILES_PATH)
    if found:
        return found
    try:
        from executorch_trt import runtime as trt_runtime

        beside = os.path.normpath(
            os.path.join(
                os.path.dirname(trt_runtime.library_path()), "..", "benchmarks", "decode_step_cpp"
            )
        )
        if os.path.isfile(beside):
            return beside
    except Exception:  # noqa: BLE001 - no library either: the message below says what to do
        pass
    raise BinaryNotFoundError(
        "decode_step_cpp not found: run the benchmark with `./bazelw run //benchmarks:decode`, "
        "or build it (`./bazelw build //benchmarks:decode_step_cpp`) and set "
        f"{BINARY_ENV}=/path/to/bazel-bin/benchmarks/decode_step_cpp"
    )


def command(
    config: BenchConfig, built: BuiltProgram, json_path: str, binary: str | None = None
) -> list:
    """The decode_step_cpp command line for `built` (a program with its cache shapes) under
    `config`: the same prompt, decode token and position (prompt_len), warm-up and timed steps
    and threads as the Python timing worker; the JSON result goes to `json_path`."""
    ids, _ = workload.prefill_inputs(config)
    caches = ",".join(f"{name}={math.prod(shape)}" for name, shape in built.cache_shapes.items())
    return [
        binary or binary_path(),
        "--model",
        built.path,
        "--caches",
        caches,
        "--prompt",
        ",".join(str(int(i)) for i in ids[0].tolist()),
        "--token",
        str(workload.DECODE_TOKEN),
        "--max-seq-len",
        str(built.max_seq_len),
        "--warmup",
        str(config.warmup),
        "--repeats",
        str(config.repeats),
        "--threads",
        str(config.threads),
        "--json",
        json_path,
    ]


def time_decode_step(config: BenchConfig, built: BuiltProgram, work_dir: str) -> dict:
    """Runs decode_step_cpp on `built` (writing its JSON into `work_dir`) and returns its
    result: `step_ms_median`, `step_ms_p10`, `step_ms_p90` (ms), `step_ms_samples` (ms, one
    per timed step), `threads`, `fill_ms`, ... (decode_step_cpp.cpp lists them); or
    {"error": ...} saying why there is none (binary not found, a non-zero exit with the last
    line of its stderr, timeout, unreadable result)."""
    json_path = os.path.join(work_dir, f"{built.variant}_{built.max_seq_len}_cpp.json")
    try:
        cmd = command(config, built, json_path)
    except BinaryNotFoundError as exc:
        return {"error": str(exc)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"decode_step_cpp timed out after {TIMEOUT_S} s"}
    if proc.returncode != 0:
        detail = tail(proc.stderr) or tail(proc.stdout) or "(no output)"
        last = [line for line in detail.splitlines() if line.startswith("decode_step_cpp:")]
        return {
            "error": f"decode_step_cpp failed (exit {proc.returncode}): "
            f"{(last or detail.splitlines())[-1]}",
            "stderr_tail": detail,
        }
    try:
        with open(json_path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        return {"error": f"decode_step_cpp wrote no readable result to {json_path} ({exc})"}
