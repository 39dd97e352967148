"""Measuring decode steps, in the worker processes `decode.py` spawns.

Two kinds of worker run per capacity:

* the timing worker (`time_interleaved`): loads every variant into one process, fills each
  one's cache and prefills, warms each up, then runs `repeats` rounds; each round runs every
  variant, in an order shuffled every round (a seeded `random.Random`, so a run is
  repeatable): its decode steps back to back for at least `lead_in_ms` (the lead-in), then
  one more, timed (the steady step). The first lead-in step is timed too (the step after a
  switch). Every variant sees the same machine state (frequency, other load) over the same
  wall-clock window.
  Why the lead-in: a step pays for what the steps before it leave behind. A decode loop runs
  its own steps back to back, so the steady step is the one a user's loop sees, and the one
  judged. Right after another variant's step the delegate's step pays for that variant: for
  ~3 ms after `executorch_xnnpack`'s 4096-position step (its threads, its ~48 MiB read:
  not told apart here; benchmarks/README.md), and every other variant's step grows with the
  capacity. Until 2026-12-01 16:00 the rounds timed only that first step (rotated
  rounds put the delegate after `executorch_xnnpack` in 86 of 100 rounds, shuffled ones after
  every variant alike), which measured the neighbours' growth as the delegate's. Timing each
  variant in a process of its own instead showed run-to-run differences between processes of
  up to ~20% at 256 positions, larger than the effect measured.
* one profile worker per variant (`profile_variant`): that variant alone in a fresh process,
  for its peak resident memory (every worker imports the same modules first, so the
  differences are the variants' own) and the delegate's copy counter
  (`executorch_trt_bytes_copied`, process-wide, so one delegate program per process).

Steps are timed with `time.perf_counter`; a decode step always runs at the same position.
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
import resource
import statistics
import time
from collections.abc import Callable

import torch

from benchmarks import workload
from benchmarks.bench_config import BenchConfig
from benchmarks.variants import VARIANTS, data_path


@dataclasses.dataclass
class Profile:
    """Result of one profile worker: the delegate's copies per decode step (bytes; 0 for
    non-delegate variants) and resident memory (MB): `baseline_rss_mb` after imports, before
    loading the variant; `peak_rss_mb` the process's high-water mark."""

    delegate_bytes_per_step: float
    baseline_rss_mb: float
    peak_rss_mb: float
    threads: int


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mb() -> float:
    """Current resident set size in MB (VmRSS); 0 where /proc is unavailable."""
    kb = _status_kb("VmRSS")
    return (kb or 0) / 1024.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (VmHWM, else ru_maxrss)."""
    kb = _status_kb("VmHWM")
    if kb is None:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0


def summarize(step_ms: list[float]) -> dict:
    """Median, 10th and 90th percentile of step times (ms); percentiles linearly interpolated
    (`statistics.quantiles(method="inclusive")`, numpy's default)."""
    deciles = (
        statistics.quantiles(step_ms, n=10, method="inclusive") if len(step_ms) > 1 else step_ms * 9
    )
    return {
        "step_ms_median": statistics.median(step_ms),
        "step_ms_p10": deciles[0],
        "step_ms_p90": deciles[8],
    }


def set_threads(threads: int, uses_executorch: bool) -> int:
    """Sets PyTorch's intra-op threads and (for ExecuTorch variants) ExecuTorch's threadpool to
    `threads`; returns the thread count in effect."""
    torch.set_num_threads(threads)
    if uses_executorch:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        return int(portable_lib._threadpool_get_thread_count())
    return torch.get_num_threads()


def import_common_modules() -> None:
    """Imports what any variant needs (torch, transformers, executorch.exir and its runtime,
    executorch_trt's Python package, not its library), so every worker starts from the same
    baseline memory and the peak differences are the variants' own."""
    import executorch.exir
    import executorch.runtime  # noqa: F401
    import transformers  # noqa: F401

    import executorch_trt  # noqa: F401


def fill_positions(config: BenchConfig, max_seq_len: int) -> list[torch.Tensor]:
    """`cache_position` chunks of `prompt_len` positions covering 0..max_seq_len-1 (the last
    chunk ends at max_seq_len), followed by the real prompt's 0..prompt_len-1."""
    p = config.prompt_len
    starts = list(range(0, max_seq_len - p + 1, p))
    if starts[-1] + p < max_seq_len:
        starts.append(max_seq_len - p)
    chunks = [torch.arange(s, s + p, dtype=torch.long) for s in starts]
    return [*chunks, torch.arange(p, dtype=torch.long)]


def fill_cache(config: BenchConfig, max_seq_len: int, prefill: Callable) -> None:
    """Runs `prefill(input_ids, cache_position)` over every cache position, then over the
    prompt: the whole cache holds finite values (plain ExecuTorch leaves it uninitialised),
    and positions 0..prompt_len-1 hold the prompt, identically in every variant."""
    ids, _ = workload.prefill_inputs(config)
    for positions in fill_positions(config, max_seq_len):
        prefill(ids, positions)


def _eager_step(config: BenchConfig, max_seq_len: int) -> Callable[[], object]:
    module = workload.eager_module(config, max_seq_len)
    decode = workload.decode_inputs(config)

    def prefill(ids, positions):
        with torch.no_grad():
            module(ids, positions)

    fill_cache(config, max_seq_len, prefill)

    def step():
        with torch.no_grad():
            return module(*decode)

    return step


def _program_step(
    config: BenchConfig,
    max_seq_len: int,
    path: str,
    with_delegate: bool,
    data: str | None = None,
) -> Callable[[], object]:
    """Loads the program (every method first: loading a method re-initialises the shared
    cache) with its external data file `data` if any, fills the cache and prefills, and
    returns the decode step."""
    if with_delegate:
        from executorch_trt import runtime as trt_runtime

        program = trt_runtime.load(path, data=data)
    else:
        from executorch.runtime import Runtime

        program = Runtime.get().load_program(path)
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    fill_cache(config, max_seq_len, lambda ids, pos: prefill.execute([ids, pos]))
    inputs = list(workload.decode_inputs(config))
    return lambda: decode.execute(inputs)


def _delegate_counter():
    """The delegate's cumulative, process-wide copy counter (bytes), as a callable."""
    from executorch_trt import runtime as trt_runtime

    lib = trt_runtime.load_library()
    lib.executorch_trt_bytes_copied.restype = ctypes.c_uint64
    lib.executorch_trt_bytes_copied.argtypes = []
    return lib.executorch_trt_bytes_copied


def prepare_step(
    config: BenchConfig, variant: str, max_seq_len: int, path: str | None
) -> Callable[[], object]:
    """Loads `variant` at `max_seq_len` (`path`: its `.pte`, None for eager), fills its cache
    and prefills; returns its decode step. Raises whatever loading or executing raises."""
    kind = VARIANTS[variant].kind
    if kind == "eager":
        return _eager_step(config, max_seq_len)
    return _program_step(config, max_seq_len, path, kind == "delegate", data_path(variant, path))


def time_step(step: Callable[[], object]) -> float:
    """Runs `step` once; its wall time in ms (`time.perf_counter`)."""
    start = time.perf_counter()
    step()
    return (time.perf_counter() - start) * 1e3


#: Seed of the timing worker's per-round shuffle (the same orders in every run).
ROUND_ORDER_SEED = 15


def time_interleaved(
    config: BenchConfig, max_seq_len: int, programs: dict[str, str | None]
) -> dict[str, dict[str, list[float]]]:
    """The timing worker: {"steady": {variant: ms...}, "after_switch": {variant: ms...}}, each
    `repeats` decode-step times per variant in `programs` ({variant: .pte path, None for
    eager}), all loaded in this process. Every round runs each variant, in an order shuffled
    every round (ROUND_ORDER_SEED): its lead-in steps back to back for at least
    `config.lead_in_ms`, then the steady step. "after_switch" is the first lead-in step (the
    steady step itself when `lead_in_ms` is 0). See the module docstring for why."""
    import_common_modules()
    uses_executorch = any(VARIANTS[v].kind != "eager" for v in programs)
    set_threads(config.threads, uses_executorch)
    names = list(programs)
    steps = {v: prepare_step(config, v, max_seq_len, programs[v]) for v in names}
    for _ in range(config.warmup):
        for v in names:
            steps[v]()
    steady: dict[str, list[float]] = {v: [] for v in names}
    after_switch: dict[str, list[float]] = {v: [] for v in names}

    order = random.Random(ROUND_ORDER_SEED)
    for _ in range(config.repeats):
        for v in order.sample(names, len(names)):
            step = steps[v]
            if config.lead_in_ms > 0:
                lead_in_start = time.perf_counter()
                after_switch[v].append(time_step(step))
                while (time.perf_counter() - lead_in_start) * 1e3 < config.lead_in_ms:
                    step()
            steady[v].append(time_step(step))
            if config.lead_in_ms <= 0:
                after_switch[v].append(steady[v][-1])
    return {"steady": steady, "after_switch": after_switch}


PROFILE_STEPS = 5  # counted decode steps per profile worker: copies/step and peak memory are
#                   the same every step once warm, so timing-sized runs would only cost time


def profile_variant(
    config: BenchConfig, variant: str, max_seq_len: int, path: str | None
) -> Profile:
    """The profile worker: `variant` alone in this process; loads it, fills and prefills, runs
    `warmup` + PROFILE_STEPS decode steps, and returns its peak memory and the delegate's
    copies per step over the last PROFILE_STEPS steps. Raises whatever loading or executing
    raises."""
    kind = VARIANTS[variant].kind
    import_common_modules()
    threads = set_threads(config.threads, kind != "eager")
    baseline = rss_mb()
    step = prepare_step(config, variant, max_seq_len, path)
    counter = _delegate_counter() if kind == "delegate" else (lambda: 0)
    for _ in range(config.warmup):
        step()
    before = counter()
    for _ in range(PROFILE_STEPS):
        step()
    delta = counter() - before
    copied = delta // PROFILE_STEPS if delta % PROFILE_STEPS == 0 else delta / PROFILE_STEPS
    return Profile(copied, baseline, peak_rss_mb(), threads)
