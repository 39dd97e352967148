"""What the benchmark commands (`decode.py`, `generate.py`) share: the flags both take, flag
values, the output directory, and running a worker process that prints one JSON result line."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable


def positive_int(flag: str, text: str, minimum: int = 1) -> int:
    """`text` as an int >= `minimum`; `argparse.ArgumentTypeError` naming `flag` otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        kind = "a positive" if minimum == 1 else f"an integer >= {minimum}, not a"
        raise argparse.ArgumentTypeError(f"{flag} must be {kind} integer, got {text!r}")
    return value


def add_count_flag(p: argparse.ArgumentParser, flag: str, help_text: str, minimum: int = 1) -> None:
    """Adds `flag`, an int >= `minimum` (None when absent; a bad value exits 2 naming `flag`)."""
    p.add_argument(flag, type=lambda s: positive_int(flag, s, minimum), help=help_text)


def add_run_flags(
    p: argparse.ArgumentParser, variants: Iterable[str], quick_help: str, keep_help: str
) -> None:
    """Adds the flags both benchmarks take alike: --threads (int >= 1 or None), --variants
    (a list of names from `variants`, default all), --quick and --keep-programs (bools), and
    the internal worker-mode --programs and --config-json (JSON strings)."""
    variants = list(variants)
    add_count_flag(p, "--threads", "intra-op threads in every variant (default: usable CPUs)")
    p.add_argument(
        "--variants",
        type=lambda s: variant_list(variants, s),
        default=list(variants),
        help=f"comma-separated subset of: {', '.join(variants)} (default: all)",
    )
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--keep-programs", action="store_true", help=keep_help)
    p.add_argument("--programs", help=argparse.SUPPRESS)
    p.add_argument("--config-json", help=argparse.SUPPRESS)


def reject_worker_flags(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """`p.error` (exit 2) naming --programs or --config-json when given outside worker mode
    (they are internal: `add_run_flags`)."""
    for flag in ("programs", "config_json"):
        if getattr(args, flag):
            p.error(f"--{flag.replace('_', '-')} is internal (worker mode); leave it out")


def variant_list(known: Iterable[str], text: str) -> list[str]:
    """Comma-separated variant names -> list without repeats, in the given order;
    `argparse.ArgumentTypeError` naming --variants and an unknown one (`known`: the names)."""
    known = list(known)
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--variants: unknown variant(s) {unknown or [text]}; known: {', '.join(known)}"
        )
    return names


def resolve(path: str) -> str:
    """`path` relative to where `bazel run` was invoked (else the current directory)."""
    base = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())
    return os.path.abspath(os.path.join(base, path))


def check_out_dir(out_dir: str, p: argparse.ArgumentParser) -> None:
    """Creates `out_dir` and writes a probe file in it, before the minutes of export;
    `p.error` (exit 2) naming --out if either fails."""
    try:
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as exc:
        p.error(
            f"--out: cannot write results to {out_dir!r} ({exc.strerror or exc}); "
            "pass a writable directory"
        )


def out_dir_of(args: argparse.Namespace, p: argparse.ArgumentParser, temp_prefix: str) -> str:
    """The run's output directory: --out (`resolve`d); else $BUILD_WORKING_DIRECTORY/bench_out
    under `bazel run`, else a new temp directory whose name starts with `temp_prefix`. Created
    and checked writable by `check_out_dir` (`p.error`, exit 2, when it is not)."""
    if args.out:
        out_dir = resolve(args.out)
    elif os.environ.get("BUILD_WORKING_DIRECTORY"):
        out_dir = os.path.join(os.environ["BUILD_WORKING_DIRECTORY"], "bench_out")
    else:
        out_dir = tempfile.mkdtemp(prefix=temp_prefix)
    check_out_dir(out_dir, p)
    return out_dir


def tail(text: str, lines: int = 12) -> str:
    """The last `lines` lines of `text`, stripped."""
    return "\n".join(text.strip().splitlines()[-lines:])


def worker_env(needs_delegate: bool) -> dict[str, str]:
    """This process's environment, with EXECUTORCH_TRT_LIBRARY set when a worker that loads
    delegate programs needs it and it is not set (the worker reports a missing library)."""
    env = dict(os.environ)
    if needs_delegate and "EXECUTORCH_TRT_LIBRARY" not in env:
        try:
            from executorch_trt import runtime as trt_runtime

            env["EXECUTORCH_TRT_LIBRARY"] = os.path.abspath(trt_runtime.library_path())
        except Exception:  # noqa: BLE001 - the worker then reports the missing library
            pass
    return env


def run_worker_process(
    cmd: list[str],
    env: dict[str, str],
    timeout_s: float,
    mode: str,
    label: str,
    result_marker: str,
) -> dict:
    """Runs `cmd` and returns the JSON after `result_marker` on its stdout, or {"error": ...}
    naming how it failed (timed out after `timeout_s` seconds, or its exit status and the last
    line of its output; the output's tail also goes to stderr under `label`)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{mode} worker timed out after {timeout_s:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(result_marker):
            result: dict = json.loads(line[len(result_marker) :])
            return result
    detail = tail(proc.stderr) or tail(proc.stdout) or "(no output)"
    print(
        f"    {label} failed (exit {proc.returncode}):\n"
        + "\n".join("      " + line for line in detail.splitlines()),
        file=sys.stderr,
    )
    return {"error": f"{mode} run failed (exit {proc.returncode}): {detail.splitlines()[-1]}"}
