"""Generation benchmark: whole greedy generations, prefill, export and the memory roofline, at
the sizes users run (a SmolLM-135M- or Qwen2.5-0.5B-shaped decoder), for eager PyTorch, the
executorch-trt delegate, plain ExecuTorch + XNNPACK and ExecuTorch's CPU LLM recipe.

usage: ./bazelw run //benchmarks:generate -- [--model tiny|smollm-135m|qwen2.5-0.5b]
           [--max-seq-len 512] [--out DIR] [--repeats N] [--prefill-repeats N] [--warmup N]
           [--threads N] [--variants a,b,...] [--quick] [--keep-programs]

Each program variant is exported in a process of its own (`--worker export`: export time,
the process's peak RSS, the `.pte`'s size); then one timing process (`--worker time`,
generation_timing.py) measures the memory bandwidth, loads every variant and times prefills
and whole generations, the variants interleaved. Prints the table, writes generate_bench.json
and generate_bench.png to --out.

Exit status: 0 every variant measured; 1 some variant failed (its row says why; the rest is
still written) or the results could not be written; 2 bad usage (the message names the flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

if __package__ in (None, ""):
    # Run as a script (bazel run, or the worker re-invocation): make `benchmarks` importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import command_line, generate_report, generate_variants, machine, roofline
from benchmarks.generate_config import MODELS, GenerateConfig, full_config, quick_config
from benchmarks.process_memory import PeakTreePss

RESULT_MARKER = "GENERATE_BENCH_RESULT "
EXPORT_TIMEOUT_S = 3600
#: The timing worker's budget per decode step of one variant (s): generous for a 135M model
#: at 2048 positions on 2 shared cores.
TIMEOUT_PER_STEP_S = 0.5
VARIANT_NAMES = tuple(generate_variants.VARIANTS)


def parser() -> argparse.ArgumentParser:
    """The command line (bad values exit 2 with a message naming the flag)."""
    p = argparse.ArgumentParser(
        prog="generate",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", choices=sorted(MODELS), help="the decoder (default smollm-135m)")
    command_line.add_count_flag(
        p, "--max-seq-len", "static cache capacity, positions (default 512; quick 48)", minimum=2
    )
    p.add_argument("--out", help="output directory (default: $BUILD_WORKING_DIRECTORY/bench_out)")
    command_line.add_count_flag(
        p, "--repeats", "whole generations timed per variant (default 2; quick 1)"
    )
    command_line.add_count_flag(
        p, "--prefill-repeats", "timed prefills per variant and prompt length (default 5; quick 1)"
    )
    command_line.add_count_flag(
        p,
        "--warmup",
        "untimed decode steps per variant before timing (default 3; quick 1)",
        minimum=0,
    )
    command_line.add_run_flags(
        p,
        generate_variants.VARIANTS,
        quick_help="the tiny model, 48 positions (the test's mode)",
        keep_help="keep the .pte files under OUT/programs",
    )
    # Worker mode (internal): prints RESULT_MARKER + one JSON line.
    p.add_argument("--worker", choices=("export", "time"), help=argparse.SUPPRESS)
    return p


def config_from_args(args, p: argparse.ArgumentParser) -> GenerateConfig:
    """The run's GenerateConfig: the full or quick preset with the flags applied; `p.error`
    (exit 2) when the capacity leaves fewer than `end_steps` positions to decode."""
    threads = args.threads or machine.usable_cpus()
    if args.quick:
        if args.model not in (None, "tiny"):
            p.error(f"--quick runs the tiny model; leave out --model {args.model}")
        config = quick_config(threads)
    else:
        config = full_config(args.model or "smollm-135m", 512, threads)
    changes = {
        k: v
        for k, v in (
            ("max_seq_len", args.max_seq_len),
            ("repeats", args.repeats),
            ("prefill_repeats", args.prefill_repeats),
            ("warmup", args.warmup),
        )
        if v is not None
    }
    config = config.replace(**changes)
    need = config.prompt_len + max(config.end_steps, config.warmup) + 1
    if config.max_seq_len < need:
        p.error(
            f"--max-seq-len: must be at least {need} (a {config.prompt_len}-token prompt, then "
            f"at least {max(config.end_steps, config.warmup)} decode positions); got "
            f"{config.max_seq_len}"
        )
    return config


# ----------------------------------------------------------------------------- worker side


def export_worker(config: GenerateConfig, variant: str, path: str) -> dict:
    """This process exports `variant` to `path`: {"export_s", "convert_s" (s),
    "baseline_rss_mb" (after imports and building the model), "peak_rss_mb" (ru_maxrss, MB),
    "peak_tree_pss_mb" (with the partition build workers, `backend/partition_builds.py`:
    `process_memory.PeakTreePss`, MiB), "program_bytes", "data_bytes" (the `.ptd`'s, or
    None), "engine", "decode_delegates"}."""
    from benchmarks import measure

    measure.import_common_modules()
    model = config.spec.build(config.max_seq_len)
    baseline = measure.rss_mb()
    with PeakTreePss() as memory:
        times = generate_variants.export_variant(config, variant, model, path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux
    engine, delegates = generate_variants.engine_of(path, generate_variants.decode_method(variant))
    data = generate_variants.data_path(variant, path)
    return {
        **times,
        "baseline_rss_mb": baseline,
        "peak_rss_mb": peak,
        "peak_tree_pss_mb": memory.peak_mib,
        "program_bytes": os.path.getsize(path),
        "data_bytes": os.path.getsize(data) if data else None,
        "engine": engine,
        "decode_delegates": delegates,
    }


def run_worker(args, p: argparse.ArgumentParser) -> int:
    """--worker: `export` (--programs {variant: path}, one) or `time` (every program)."""
    try:
        config = GenerateConfig.from_json(args.config_json or "")
        programs = json.loads(args.programs or "")
        ok = isinstance(programs, dict) and programs and set(programs) <= set(VARIANT_NAMES)
    except (ValueError, KeyError, TypeError) as exc:
        p.error(f"--worker needs --config-json and --programs ({exc!r})")
    if not ok or (args.worker == "export" and len(programs) != 1):
        p.error(f"--programs must map variant names to .pte paths; got {args.programs!r}")
    if args.worker == "export":
        ((variant, path),) = programs.items()
        result = export_worker(config, variant, path)
    else:
        from benchmarks import generation_timing

        result = generation_timing.time_generations(config, programs)
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


# ------------------------------------------------------------------------- orchestrator side


def spawn_worker(
    config: GenerateConfig, mode: str, programs: dict[str, str | None], timeout_s: float
) -> dict:
    """Runs one worker process; its result, or {"error": ...} naming how it failed."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        mode,
        "--programs",
        json.dumps(programs),
        "--config-json",
        config.to_json(),
    ]
    label = f"{mode} worker {','.join(programs)}"
    return command_line.run_worker_process(
        cmd, command_line.worker_env(True), timeout_s, mode, label, RESULT_MARKER
    )


#: A row's export fields, each from the export worker's result key.
_EXPORT_FIELDS = {
    "export_s": "export_s",
    "convert_s": "convert_s",
    "export_peak_rss_mb": "peak_rss_mb",
    "export_peak_tree_pss_mb": "peak_tree_pss_mb",
    "export_baseline_rss_mb": "baseline_rss_mb",
    "program_bytes": "program_bytes",
    "data_bytes": "data_bytes",
}


def make_row(
    config: GenerateConfig, variant: str, exported: dict | None, timed: dict, min_ms: float | None
) -> dict:
    """One JSON row (generate_report's module docstring) from the variant's export worker
    result (None for eager) and the timing worker's result."""
    from benchmarks import generation_timing

    row: dict = {
        "variant": variant,
        "description": generate_variants.VARIANTS[variant],
        "engine": "eager PyTorch" if exported is None else exported.get("engine"),
        "decode_delegates": None if exported is None else exported.get("decode_delegates"),
        **dict.fromkeys(_EXPORT_FIELDS),
    }
    if exported is not None and not exported.get("error"):
        row.update({field: exported[key] for field, key in _EXPORT_FIELDS.items()})
    error = (exported or {}).get("error") or timed.get("error")
    if not error and variant not in timed["decode"]:
        error = "the timing worker returned nothing for it"
    if error:
        return {**row, "error": error}
    d = timed["decode"][variant]
    stats = generation_timing.summarize_decode(config, d)
    reference = timed["decode"].get(generate_variants.EAGER, {}).get("tokens")
    tokens = (
        generation_timing.compare_tokens(d["tokens"], reference)
        if reference is not None
        else {"tokens_equal": None, "first_divergence": None, "tokens_compared": None}
    )
    prefill = timed["prefill"][variant]
    return {
        **row,
        **stats,
        "tok_s_median": 1e3 / stats["decode_ms_median"] if stats["decode_ms_median"] else None,
        "tok_s_end": 1e3 / stats["end_ms_median"] if stats["end_ms_median"] else None,
        "roofline_fraction_median": roofline.fraction(min_ms, stats["decode_ms_median"])
        if min_ms and variant not in generate_variants.QUANTIZED
        else None,
        "roofline_fraction_end": roofline.fraction(min_ms, stats["end_ms_median"])
        if min_ms and variant not in generate_variants.QUANTIZED
        else None,
        "prefill_ms": {n: statistics.median(v) for n, v in prefill.items()},
        "prefill_ms_samples": prefill,
        **tokens,
        "tokens": d["tokens"],
        "generations_consistent": timed["consistent"][variant],
        "logits_max_abs_diff": timed["logits_max_abs_diff"][variant],
        "steps_ms": d["steps_ms"],
        "after_switch": d["after_switch"],
        "error": None,
    }


def run_benchmark(config: GenerateConfig, names: list[str], out_dir: str, keep: bool) -> int:
    """Exports, times, prints the table and writes JSON + PNG to `out_dir`. Returns 0, or 1
    when a variant failed or the results could not be written."""
    program_dir = (
        os.path.join(out_dir, "programs") if keep else tempfile.mkdtemp(prefix="generate_bench_")
    )
    os.makedirs(program_dir, exist_ok=True)
    host = machine.describe(config.threads)
    exported: dict[str, dict] = {}
    try:
        for name in names:
            if name == generate_variants.EAGER:
                continue
            path = generate_variants.program_path(program_dir, name, config.max_seq_len)
            print(f"exporting {name} ({config.model}, {config.max_seq_len} positions)", flush=True)
            t0 = time.time()
            exported[name] = spawn_worker(config, "export", {name: path}, EXPORT_TIMEOUT_S)
            exported[name]["path"] = path
            status = exported[name].get("error") or (
                f"{exported[name]['export_s']:.1f} s, peak RSS "
                f"{exported[name]['peak_rss_mb']:.0f} MB"
            )
            print(f"  {name}: {status} (worker {time.time() - t0:.0f} s)", flush=True)
        runnable = {
            n: (None if n == generate_variants.EAGER else exported[n]["path"])
            for n in names
            if n == generate_variants.EAGER or not exported[n].get("error")
        }
        steps = len(config.decode_positions()) * config.repeats + config.warmup
        budget = 600 + TIMEOUT_PER_STEP_S * steps * len(runnable)
        print(f"timing {', '.join(runnable)} interleaved", flush=True)
        timed = spawn_worker(config, "time", runnable, budget) if runnable else {"error": "none"}
    finally:
        if not keep:
            shutil.rmtree(program_dir, ignore_errors=True)
    roof = None
    if not timed.get("error"):
        bandwidth = timed["bandwidth"]
        weights = timed["weight_bytes_per_token"]
        roof = {
            "bandwidth": bandwidth,
            "weight_bytes_per_token": weights,
            "weight_bytes_rule": roofline.__doc__.split("\n\n")[1].replace("\n", " "),
            "min_ms_per_token": roofline.min_ms_per_token(weights, bandwidth["bytes_per_s"]),
        }
    min_ms = roof["min_ms_per_token"] if roof else None
    rows = [make_row(config, n, exported.get(n), timed, min_ms) for n in names]
    meta = {
        "model": {
            "name": config.model,
            "description": config.spec.describe(),
            **dataclasses.asdict(config.spec),
        },
        "machine": host,
        "settings": {
            **dataclasses.asdict(config),
            "effective_prefill_lens": list(config.effective_prefill_lens()),
            "decode_positions": config.decode_positions(),
            "threads_in_effect": timed.get("threads"),
        },
        "roofline": roof,
    }
    print("\n" + generate_report.table(rows, meta))
    json_path = os.path.join(out_dir, generate_report.JSON_NAME)
    plot_path = os.path.join(out_dir, generate_report.PLOT_NAME)
    try:
        generate_report.write_json(json_path, rows, meta)
        generate_report.write_plot(plot_path, rows, meta)
    except OSError as exc:
        print(f"\nerror: could not write the results to {out_dir}: {exc}", file=sys.stderr)
        return 1
    print(f"\nwrote {json_path}\nwrote {plot_path}")
    return 1 if any(r["error"] for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.worker:
        return run_worker(args, p)
    command_line.reject_worker_flags(args, p)
    config = config_from_args(args, p)
    out_dir = command_line.out_dir_of(args, p, "generate_bench_")
    return run_benchmark(config, args.variants, out_dir, args.keep_programs)


if __name__ == "__main__":
    sys.exit(main())
