"""Decode-step benchmark: what the executorch-trt delegate costs against eager PyTorch and
plain ExecuTorch.

usage: ./bazelw run //benchmarks:decode -- [--out DIR] [--max-seq-lens 256,1024,2048,4096]
           [--repeats N] [--warmup N] [--lead-in-ms MS] [--threads N] [--variants a,b,...]
           [--quick] [--keep-programs]

For each cache capacity it exports the same seeded Llama-architecture model once and builds
each variant's program (variants.py). It then runs this script again as worker processes
(measure.py): one timing worker with every variant loaded, timed in rounds shuffled every
round (median, p10, p90 of one decode step at a fixed position after a prefill, run right
after the same variant's steps, as in a decode loop: `--lead-in-ms`), and one
profile worker per variant, alone, for its peak resident memory and the delegate's copy
counter; and it times the delegate's in-place decode step once more from C++ (cpp_timing.py:
the decode_step_cpp binary, no Python runtime in the process). Bytes copied per step =
copies in the program's instructions (copy_accounting.py) + the delegate's counter. Prints
the table and the targets, writes decode_bench.json and decode_bench.png to --out.

Exit status: 0 all rows measured; 1 some variant or C++ timing failed (its rows say why; the
rest is still written); 2 bad usage (the message names the flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

if __package__ in (None, ""):
    # Run as a script (bazel run, or the worker re-invocation): make `benchmarks` importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import command_line, cpp_timing, machine, report
from benchmarks.bench_config import BenchConfig, full_config, quick_config
from benchmarks.variants import VARIANTS, BuiltProgram, data_path

RESULT_MARKER = "DECODE_BENCH_RESULT "
WORKER_TIMEOUT_S = 900
TIMING = (
    "all variants of a capacity in one process; each round runs every variant's lead-in "
    "and timed decode step back to back, variants in an order shuffled every round "
    "(seeded)"
)


#: --lead-in-ms upper bound: every round runs each variant's lead-in, and the timing worker
#: must finish within WORKER_TIMEOUT_S (100 rounds x 7 variants x 1 s = 700 s).
MAX_LEAD_IN_MS = 1000.0


def _lead_in_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_LEAD_IN_MS:
        raise argparse.ArgumentTypeError(
            f"--lead-in-ms must be a number from 0 to {MAX_LEAD_IN_MS:g}, got {text!r}"
        )
    return value


def _int_list(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"--max-seq-lens must be comma-separated positive integers, got {text!r}"
        )
    return sorted(set(values))


def parser() -> argparse.ArgumentParser:
    """The command line (bad values exit 2 with a message naming the flag)."""
    p = argparse.ArgumentParser(
        prog="decode",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out",
        help="output directory (default: $BUILD_WORKING_DIRECTORY/"
        "bench_out, else a new temp directory)",
    )
    p.add_argument(
        "--max-seq-lens",
        type=_int_list,
        help="cache capacities, comma-separated (default 256,1024,2048,4096; quick 32)",
    )
    command_line.add_count_flag(
        p, "--repeats", "timed decode steps per variant and capacity (default 100; quick 2)"
    )
    command_line.add_count_flag(
        p, "--warmup", "untimed decode steps before timing (default 5; quick 1)", minimum=0
    )
    p.add_argument(
        "--lead-in-ms",
        type=_lead_in_ms,
        help="per round, run a variant's decode steps back to back for at least this "
        "long before its timed step (default 5; 0 times the step right after "
        "another variant's)",
    )
    command_line.add_run_flags(
        p,
        VARIANTS,
        quick_help="tiny 1-layer model, 32 positions, 2 repeats (the test's mode)",
        keep_help="keep the exported .pte files under OUT/programs",
    )
    p.add_argument(
        "--from-json",
        metavar="FILE",
        help="measure nothing: print the table and judge the targets of an earlier "
        "run's decode_bench.json (e.g. benchmarks/results/decode_bench.json)",
    )
    # Worker mode (internal): `time` (all --programs, interleaved) or `profile` (one), prints
    # RESULT_MARKER + one JSON line.
    p.add_argument("--worker", choices=("time", "profile"), help=argparse.SUPPRESS)
    command_line.add_count_flag(p, "--max-seq-len", argparse.SUPPRESS)
    return p


def config_from_args(args, p: argparse.ArgumentParser) -> BenchConfig:
    """The run's BenchConfig: the full or quick preset with the flags applied; `p.error`
    (exit 2) when the prefill does not fit in the smallest capacity."""
    threads = args.threads or machine.usable_cpus()
    config = quick_config(threads) if args.quick else full_config(threads)
    changes = {
        k: v
        for k, v in (
            ("max_seq_lens", tuple(args.max_seq_lens or ())),
            ("repeats", args.repeats),
            ("warmup", args.warmup),
            ("lead_in_ms", args.lead_in_ms),
        )
        if v is not None and v != ()
    }
    config = config.replace(**changes)
    if min(config.max_seq_lens) <= config.prompt_len:
        p.error(
            f"--max-seq-lens: every capacity must exceed the prefill length "
            f"{config.prompt_len} (decode runs at position {config.prompt_len})"
        )
    return config


# ----------------------------------------------------------------------------- worker side


def run_worker(args, p: argparse.ArgumentParser) -> int:
    """Worker mode: `--worker time` times every variant of `--programs` ({variant: .pte path or
    null}) interleaved; `--worker profile` profiles its single variant. Prints RESULT_MARKER +
    JSON: measure.time_interleaved's {"steady": {variant: [ms, ...]}, "after_switch": ...} or a
    measure.Profile."""
    if not (args.config_json and args.max_seq_len and args.programs):
        p.error("--worker needs --max-seq-len, --programs and --config-json")
    try:
        programs = json.loads(args.programs)
        ok = (
            isinstance(programs, dict)
            and programs
            and all(
                v in VARIANTS and (path is None) == (VARIANTS[v].kind == "eager")
                for v, path in programs.items()
            )
        )
    except json.JSONDecodeError:
        ok = False
    if not ok or (args.worker == "profile" and len(programs) != 1):
        p.error(
            f"--programs must map variant names to .pte paths (null for eager), one for "
            f"--worker profile; got {args.programs!r}"
        )
    from benchmarks import measure

    try:
        config = BenchConfig.from_json(args.config_json)
    except (ValueError, KeyError, TypeError) as exc:
        p.error(f"--config-json: not a BenchConfig ({exc!r})")
    if args.worker == "time":
        result = measure.time_interleaved(config, args.max_seq_len, programs)
    else:
        ((variant, path),) = programs.items()
        result = dataclasses.asdict(
            measure.profile_variant(config, variant, args.max_seq_len, path)
        )
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


# ------------------------------------------------------------------------- orchestrator side


def spawn_worker(
    config: BenchConfig, mode: str, max_seq_len: int, programs: dict[str, str | None]
) -> dict:
    """Runs one worker process (`mode` "time" or "profile"); returns its result, or
    {"error": ...} naming how it failed."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        mode,
        "--max-seq-len",
        str(max_seq_len),
        "--programs",
        json.dumps(programs),
        "--config-json",
        config.to_json(),
    ]
    env = command_line.worker_env(any(VARIANTS[v].kind == "delegate" for v in programs))
    label = f"{mode} worker {','.join(programs)}@{max_seq_len}"
    return command_line.run_worker_process(cmd, env, WORKER_TIMEOUT_S, mode, label, RESULT_MARKER)


#: A row's C++ timing fields, each from decode_step_cpp's result key (`cpp_error` apart).
_CPP_SOURCES = {
    "step_ms_cpp_median": "step_ms_median",
    "step_ms_cpp_p10": "step_ms_p10",
    "step_ms_cpp_p90": "step_ms_p90",
    "step_ms_cpp_samples": "step_ms_samples",
    "cpp_threads": "threads",
}
CPP_FIELDS = (*_CPP_SOURCES, "cpp_engine", "cpp_error")


def cpp_fields(cpp: dict | None) -> dict:
    """A row's C++ timing fields from decode_step_cpp's result (cpp_timing.time_decode_step):
    `step_ms_cpp_median`, `step_ms_cpp_p10`, `step_ms_cpp_p90` (ms), `step_ms_cpp_samples`
    (ms, one per timed step), `cpp_threads`, `cpp_engine` (the engines decode_step_cpp read
    off the program, e.g. "portable, CPU"), and `cpp_error` (why there are none). All None
    when the variant is not timed in C++ (`cpp` None)."""
    out = dict.fromkeys(CPP_FIELDS)
    if cpp is None:
        return out
    if cpp.get("error"):
        out["cpp_error"] = cpp["error"]
        return out
    out.update({field: cpp[key] for field, key in _CPP_SOURCES.items()})
    out["cpp_engine"] = cpp.get("engine")
    return out


def _file_size(path: str | None) -> int | None:
    return os.path.getsize(path) if path and os.path.isfile(path) else None


def make_row(
    config: BenchConfig,
    built: BuiltProgram,
    step_ms,
    profile: dict,
    cpp: dict | None = None,
    after_switch: list[float] | None = None,
) -> dict:
    """One JSON row from a build (copy accounting), the variant's steady step times from the
    timing worker (a list of ms, or {"error": ...}), its profile worker's result, for a variant
    timed in C++ too decode_step_cpp's result (`cpp`; see cpp_fields), and the times of its
    first step after another variant's (`after_switch`, ms; reported, not judged)."""
    from benchmarks import measure

    row = {
        "variant": built.variant,
        "max_seq_len": built.max_seq_len,
        "description": VARIANTS[built.variant].description,
        # What runs its decode step, read off its program (variants.decode_engine).
        "engine": built.engine,
        "decode_delegates": built.decode_delegates,
        "cache_nbytes": config.dims.cache_nbytes(built.max_seq_len),
        # The .pte's size (bytes; None for eager): weights stored once, zero caches not at
        # all.
        "program_bytes": _file_size(built.path),
        # The external data file's size (bytes; None without one) and the model's weights
        # (parameter bytes), which the sizes are judged against.
        "data_bytes": _file_size(data_path(built.variant, built.path)),
        "weights_bytes": built.weights_bytes,
    }
    error = (
        built.error
        or (step_ms.get("error") if isinstance(step_ms, dict) else None)
        or profile.get("error")
    )
    if error:
        return {
            **row,
            "error": error,
            "step_ms_median": None,
            "step_ms_p10": None,
            "step_ms_p90": None,
            "runtime_bytes_copied_per_step": None,
            "cache_bytes_copied_per_step": None,
            "peak_rss_mb": None,
            "step_ms_after_switch_median": None,
            "step_ms_after_switch_samples": None,
            **cpp_fields(cpp),
        }
    delegate = profile["delegate_bytes_per_step"]
    return {
        **row,
        **measure.summarize(step_ms),
        "runtime_bytes_copied_per_step": built.copies.copy_bytes + delegate,
        "cache_bytes_copied_per_step": built.copies.cache_bytes + delegate,
        "other_bytes_copied_per_step": built.copies.other_bytes,
        "delegate_bytes_copied_per_step": delegate,
        "functional_cache_update_bytes_per_step": built.copies.functional_update_bytes,
        "peak_rss_mb": profile["peak_rss_mb"],
        "baseline_rss_mb": profile["baseline_rss_mb"],
        "threads": profile["threads"],
        "step_ms_samples": step_ms,
        "step_ms_after_switch_median": statistics.median(after_switch) if after_switch else None,
        "step_ms_after_switch_samples": after_switch,
        **cpp_fields(cpp),
        "error": None,
    }


def measure_capacity(
    config: BenchConfig, max_seq_len: int, names: list[str], program_dir: str
) -> list[dict]:
    """Builds every variant's program at `max_seq_len`, times the built ones together in one
    timing worker, profiles each in a worker of its own and times the cpp_timing.CPP_VARIANTS
    once more from C++ (decode_step_cpp, after the timing worker, in a process of its own)."""
    from benchmarks import variants

    print(f"[{max_seq_len} positions] exporting", flush=True)
    t0 = time.time()
    built = variants.build_programs(
        config, max_seq_len, names, program_dir, log=lambda m: print(m, flush=True)
    )
    print(f"  built in {time.time() - t0:.0f} s", flush=True)
    runnable = {n: built[n].path for n in names if not built[n].error}
    print(f"  timing {', '.join(runnable)} interleaved, {config.repeats} rounds", flush=True)
    timed = spawn_worker(config, "time", max_seq_len, runnable) if runnable else {}
    rows = []
    for name in names:
        b = built[name]
        step_ms = (
            timed
            if "error" in timed
            else timed["steady"].get(name, {"error": "the timing worker returned no times for it"})
        )
        after_switch = None if "error" in timed else timed["after_switch"].get(name)
        profile = {} if b.error else spawn_worker(config, "profile", max_seq_len, {name: b.path})
        cpp = None
        if name in cpp_timing.CPP_VARIANTS and not b.error:
            print(f"  timing {name} in C++ (decode_step_cpp), {config.repeats} steps", flush=True)
            cpp = cpp_timing.time_decode_step(config, b, program_dir)
            if cpp.get("stderr_tail"):
                print(
                    "    decode_step_cpp failed:\n"
                    + "\n".join("      " + line for line in cpp.pop("stderr_tail").splitlines()),
                    file=sys.stderr,
                )
        row = make_row(config, b, step_ms, profile, cpp, after_switch)
        status = row["error"] or f"{row['step_ms_median']:.3f} ms/step ({row['engine']})"
        if row["cpp_error"]:
            status += f"; C++: {row['cpp_error']}"
        elif row["step_ms_cpp_median"] is not None:
            status += f"; C++ {row['step_ms_cpp_median']:.3f} ms/step"
        print(f"  {name}: {status}", flush=True)
        rows.append(row)
    return rows


def run_benchmark(config: BenchConfig, names: list[str], out_dir: str, keep_programs: bool) -> int:
    """Runs every capacity, prints the table and targets, then writes JSON + PNG to `out_dir`.
    Returns 0, or 1 when a variant failed or the results could not be written."""
    program_dir = (
        os.path.join(out_dir, "programs")
        if keep_programs
        else tempfile.mkdtemp(prefix="decode_bench_programs_")
    )
    os.makedirs(program_dir, exist_ok=True)
    host = machine.describe(config.threads)
    try:
        rows = [
            r for s in config.max_seq_lens for r in measure_capacity(config, s, names, program_dir)
        ]
    finally:
        if not keep_programs:
            shutil.rmtree(program_dir, ignore_errors=True)
    meta = {
        "model": dataclasses.asdict(config.dims),
        "machine": host,
        "settings": {
            "max_seq_lens": list(config.max_seq_lens),
            "prompt_len": config.prompt_len,
            "decode_position": config.prompt_len,
            "timing": TIMING,
            "cpp_timing": cpp_timing.DESCRIPTION,
            "repeats": config.repeats,
            "warmup": config.warmup,
            "lead_in_ms": config.lead_in_ms,
            "threads": config.threads,
        },
    }
    targets = print_results(rows, meta)
    meta["targets"] = [{"target": n, "met": ok, "detail": d} for n, ok, d in targets]
    json_path = os.path.join(out_dir, report.JSON_NAME)
    plot_path = os.path.join(out_dir, report.PLOT_NAME)
    try:
        report.write_json(json_path, rows, meta)
        report.write_plot(plot_path, rows, report.header(meta)[0])
    except OSError as exc:
        print(f"\nerror: could not write the results to {out_dir}: {exc}", file=sys.stderr)
        return 1
    print(f"\nwrote {json_path}\nwrote {plot_path}")
    return 1 if any(r["error"] or r["cpp_error"] for r in rows) else 0


def results_text(rows: list[dict], meta: dict):
    """(the table and judged targets as text, the targets); raises KeyError/TypeError/
    ValueError on rows or metadata this benchmark did not write."""
    targets = report.check_targets(rows)
    note = report.after_switch_note(rows)
    text = (
        report.table(rows, report.header(meta) + report.engines_block(rows) + [""])
        + "\n\ntargets:\n"
        + report.format_targets(targets)
        + ("\n" + note if note else "")
    )
    return text, targets


def print_results(rows: list[dict], meta: dict):
    """Prints the table and the judged targets; returns the targets (report.check_targets)."""
    text, targets = results_text(rows, meta)
    print("\n" + text)
    return targets


def show_json(path: str, p: argparse.ArgumentParser) -> int:
    """--from-json: prints an earlier run's table and targets (judged by this version's
    rules). Exit 0, 1 if a row of it had failed; `p.error` (2) on a file this benchmark did
    not write (unreadable, not JSON, fields missing)."""
    try:
        with open(path) as f:
            result = json.load(f)
        rows = result["rows"]
        text, _ = results_text(rows, result)
    except (OSError, ValueError, KeyError, TypeError, ArithmeticError, RecursionError) as exc:
        p.error(
            f"--from-json: cannot read a decode_bench.json from {path!r} ({exc!r}); pass "
            "a file this benchmark wrote"
        )
    print("\n" + text)
    return 1 if any(r.get("error") or r.get("cpp_error") for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.worker:
        return run_worker(args, p)
    if args.max_seq_len:
        p.error("--max-seq-len is internal; did you mean --max-seq-lens (comma-separated)?")
    command_line.reject_worker_flags(args, p)
    if args.from_json:
        return show_json(command_line.resolve(args.from_json), p)
    config = config_from_args(args, p)
    out_dir = command_line.out_dir_of(args, p, "decode_bench_")
    return run_benchmark(config, args.variants, out_dir, args.keep_programs)


if __name__ == "__main__":
    sys.exit(main())
