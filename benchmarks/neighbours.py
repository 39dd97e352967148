"""One variant's decode step timed alone and right after another variant's step.

usage: ./bazelw run //benchmarks:decode_neighbours -- --programs DIR [--variant delegate_inplace]
           [--before none,executorch_xnnpack,eager,sweep:64,idle:25]
           [--max-seq-lens 256,4096] [--repeats 100] [--warmup 5] [--threads N] [--steps K]

`DIR` holds the `.pte` files of an earlier `decode --keep-programs` run (`OUT/programs`:
`<variant>_<capacity>.pte`, `delegate_external_<capacity>/program.pte`). Everything runs in one
process: the timed variant at every capacity, and each `--before` variant at every capacity,
loaded, filled and prefilled as the benchmark's timing worker does (`measure.prepare_step`).
A round runs every (before, capacity) pair once, in a seeded shuffled order; each pair runs
the `before` step (untimed) and then times `--steps` consecutive decode steps of `--variant`
at that capacity (default 1): how many steps after another variant's the step takes to settle.

`before` is a variant name, `none` (the variant's previous step is the step before: it runs
back to back), `sweep:MiB` (NumPy adds 1 to a float32 array of that many MiB, one thread:
reads and writes every byte, evicting the CPU caches without ExecuTorch) or `idle:MS` (sleeps).

Prints, per `before` (and step after it, with `--steps`), the median step time (ms) at each
capacity and the growth (largest / smallest capacity). It separates what a step itself costs at each
capacity from what the step before it leaves in the CPU caches (the decode benchmark's rounds were
rotated once, which ran `delegate_inplace` right after `executorch_xnnpack` in
nearly every round; they are shuffled now).
Exit 0, or 2 on bad usage (a missing program is named).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import measure
from benchmarks.bench_config import BenchConfig, full_config
from benchmarks.variants import VARIANTS, data_path

NONE = "none"
SEED = 13

Pair = tuple[str, int]  # (before, capacity)


def program_path(programs_dir: str, variant: str, max_seq_len: int) -> str | None:
    """Where `decode --keep-programs` wrote `variant`'s `.pte` at `max_seq_len` under
    `programs_dir` (None for eager, which has no program)."""
    if VARIANTS[variant].kind == "eager":
        return None
    directory = os.path.join(programs_dir, f"{variant}_{max_seq_len}")
    if os.path.isdir(directory):  # external weights: the .pte beside its model.ptd
        return os.path.join(directory, "program.pte")
    return os.path.join(programs_dir, f"{variant}_{max_seq_len}.pte")


def parse_before(text: str) -> list[str]:
    """Comma-separated `--before` entries, checked; `ValueError` naming a bad one."""
    entries = list(dict.fromkeys(e.strip() for e in text.split(",") if e.strip()))
    for e in entries:
        kind, _, value = e.partition(":")
        if e == NONE or e in VARIANTS:
            continue
        if kind in ("sweep", "idle") and value.isdigit() and int(value) > 0:
            continue
        raise ValueError(
            f"--before: {e!r} is not none, a variant ({', '.join(VARIANTS)}), sweep:MiB or idle:MS"
        )
    if not entries:
        raise ValueError("--before: nothing given")
    return entries


def schedule(
    befores: Sequence[str], max_seq_lens: Sequence[int], rounds: int, seed: int = SEED
) -> list[list[Pair]]:
    """`rounds` rounds, each every (before, capacity) pair once in a seeded random order, so
    no pair always follows the same other pair."""
    rng = random.Random(seed)
    pairs = [(b, c) for b in befores for c in max_seq_lens]
    out = []
    for _ in range(rounds):
        order = pairs[:]
        rng.shuffle(order)
        out.append(order)
    return out


def _sweep(mib: int) -> Callable[[], None]:
    import numpy

    data = numpy.ones(mib * 2**20 // 4, dtype=numpy.float32)

    def run() -> None:
        data.__iadd__(1.0)  # one thread, every byte read and written

    return run


def prepare_before(
    config: BenchConfig, before: str, max_seq_len: int, programs_dir: str
) -> Callable[[], object]:
    """The untimed step that runs before each timed one: a variant's decode step (loaded,
    filled and prefilled as in the timing worker), a sweep, a sleep or nothing."""
    kind, _, value = before.partition(":")
    if before == NONE:
        return lambda: None
    if kind == "sweep":
        return _sweep(int(value))
    if kind == "idle":
        return lambda: time.sleep(int(value) / 1e3)
    path = program_path(programs_dir, before, max_seq_len)
    return measure.prepare_step(config, before, max_seq_len, path)


def time_after(
    config: BenchConfig,
    variant: str,
    befores: Sequence[str],
    programs_dir: str,
    steps_after: int = 1,
) -> dict[Pair, list[list[float]]]:
    """{(before, capacity): for each of the `steps_after` consecutive steps of `variant` after
    the before step, its `config.repeats` times in ms}, every pair measured in the same process
    over the same rounds (see the module docstring). `warmup` untimed rounds run first."""
    measure.import_common_modules()
    measure.set_threads(config.threads, True)
    caps = list(config.max_seq_lens)
    steps = {
        c: measure.prepare_step(config, variant, c, program_path(programs_dir, variant, c))
        for c in caps
    }
    before_steps = {
        (b, c): prepare_before(config, b, c, programs_dir) for b in befores for c in caps
    }
    times: dict[Pair, list[list[float]]] = {
        p: [[] for _ in range(steps_after)] for p in before_steps
    }
    for r, order in enumerate(schedule(befores, caps, config.warmup + config.repeats)):
        for pair in order:
            before_steps[pair]()
            step = steps[pair[1]]
            for k in range(steps_after):
                elapsed = measure.time_step(step)
                if r >= config.warmup:
                    times[pair][k].append(elapsed)
    return times


def table(
    variant: str, befores: Sequence[str], caps: Sequence[int], times: dict[Pair, list[list[float]]]
) -> str:
    """The medians (ms) per `before` (and step k after it, "#k", when more than one step was
    timed) and capacity, and the growth largest / smallest."""
    lines = [
        f"{variant} decode step, median ms, after:",
        f"{'before':22s}" + "".join(f"{c:>10d}" for c in caps) + "    growth",
    ]
    for b in befores:
        per_step = times[(b, caps[0])]
        for k in range(len(per_step)):
            meds = [statistics.median(times[(b, c)][k]) for c in caps]
            label = b if len(per_step) == 1 else f"{b} #{k + 1}"
            lines.append(
                f"{label:22s}"
                + "".join(f"{m:10.3f}" for m in meds)
                + f"    {meds[-1] / meds[0]:.2f}x"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module docstring): prints the table, returns 0; bad flags or a
    missing program exit 2 (argparse) naming the flag or the file."""
    p = argparse.ArgumentParser(prog="decode_neighbours", description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", required=True, help="OUT/programs of `decode --keep-programs`")
    p.add_argument("--variant", default="delegate_inplace", choices=sorted(VARIANTS))
    p.add_argument("--before", default="none,executorch_xnnpack,eager,sweep:64,idle:25")
    p.add_argument("--max-seq-lens", default="256,4096")
    p.add_argument("--repeats", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument(
        "--steps",
        type=int,
        default=1,
        help="consecutive steps of --variant timed after each before step",
    )
    args = p.parse_args(argv)
    try:
        befores = parse_before(args.before)
        caps = sorted({int(c) for c in args.max_seq_lens.split(",") if c.strip()})
    except ValueError as exc:
        p.error(str(exc))
    if args.repeats < 1 or args.warmup < 0 or args.threads < 1 or args.steps < 1 or not caps:
        p.error(
            "--repeats, --threads and --steps must be >= 1, --warmup >= 0, --max-seq-lens not empty"
        )
    programs_dir = os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", ""), args.programs)
    for v in [args.variant] + [b for b in befores if b in VARIANTS]:
        for c in caps:
            path = program_path(programs_dir, v, c)
            if path is not None and not os.path.isfile(path):
                p.error(f"no program {path} (run decode --keep-programs with {v} at {c})")
            if data_path(v, path) and not os.path.isfile(data_path(v, path)):
                p.error(f"no data file {data_path(v, path)}")
    config = full_config(args.threads).replace(
        max_seq_lens=tuple(caps), repeats=args.repeats, warmup=args.warmup
    )
    times = time_after(config, args.variant, befores, programs_dir, args.steps)
    print(table(args.variant, befores, caps, times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
