"""Timing whole generations, every variant loaded in one worker process (`generate.py
--worker time`).

The worker measures the machine's memory bandwidth first (`roofline.py`, before any variant
is loaded), then loads every variant, fills every cache position of each (plain ExecuTorch
leaves its caches uninitialised; `measure.fill_cache` explains why), and runs, per variant,
one untimed prefill of each length and `warmup` decode steps. Then:

* **prefill**: `prefill_repeats` rounds; a round runs every variant (order shuffled every round,
  seeded) and times each prefill length's call plus its argmax (the first token), prompt at
  positions 0..L-1;
* **generations**: `repeats` times, every variant prefills the prompt (`prompt_len` tokens,
  untimed) and decodes greedily one token per position `prompt_len..max_seq_len-1`. The
  positions are cut into segments of `segment` steps; per segment, the variants run in an
  order shuffled every segment (seeded), each its segment's steps back to back, each step
  (call + argmax) timed with `time.perf_counter`. A segment's first step follows another
  variant's and pays for it (benchmarks/README.md, "Why the Python rounds grow"): it is kept
  apart (`after_switch`) and left out of the decode statistics.

The tokens of each variant's first generation are returned with its times; the later
generations decode the same tokens (greedy, same prompt), which is checked.
"""

from __future__ import annotations

import random
import statistics
import time

import torch

from benchmarks import generate_variants, measure, roofline
from benchmarks.generate_config import GenerateConfig

#: Seed of the per-round shuffles (the same orders in every run).
ORDER_SEED = 27


def prompt(config: GenerateConfig, length: int) -> torch.Tensor:
    """input_ids[1, length] int64: a seeded prompt (the same for every variant)."""
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, config.spec.dims.vocab_size, (1, length), generator=g)


def fill_starts(config: GenerateConfig) -> list[int]:
    """Start positions of prefill chunks of `max_tokens_per_call` tokens covering every cache
    position 0..max_seq_len-1 (the last chunk ends at max_seq_len)."""
    n = config.max_tokens_per_call()
    starts = list(range(0, config.max_seq_len - n + 1, n))
    if starts[-1] + n < config.max_seq_len:
        starts.append(config.max_seq_len - n)
    return starts


def time_generations(config: GenerateConfig, programs: dict[str, str | None]) -> dict:
    """The timing worker. `programs`: {variant: .pte path, None for eager}. Returns
    {"bandwidth": roofline.measure_bandwidth's result, "weight_bytes_per_token": bytes,
    "threads": threads in effect, "prefill": {variant: {str(L): [ms, ...]}}, "decode":
    {variant: {"positions": [...], "steps_ms": [[ms per position] per generation],
    "after_switch": [[bool per position]], "tokens": [first token, then one per position]}},
    "consistent": {variant: whether every generation decoded the same tokens},
    "logits_max_abs_diff": {variant: max |logits - eager's| of the prompt's last position, or
    None without eager}}."""
    measure.import_common_modules()
    threads = measure.set_threads(config.threads, uses_executorch=True)
    bandwidth = roofline.measure_bandwidth(
        config.bandwidth_mib, config.bandwidth_repeats, config.threads
    )
    weight_bytes = roofline.weight_bytes_per_token(config.spec.build(config.max_seq_len))
    names = list(programs)
    runners = {v: generate_variants.load_runner(config, v, programs[v]) for v in names}
    fill = prompt(config, config.max_tokens_per_call())
    lens = config.effective_prefill_lens()
    for v in names:
        for start in fill_starts(config):
            runners[v].prefill(fill, start)
        for n in lens:
            runners[v].prefill(prompt(config, n), 0)
        for i in range(config.warmup):
            runners[v].decode(warmup_token(i, config), config.prompt_len + i)

    # The prompt's last-position logits of each variant, against eager's below.
    logits = {v: runners[v].prefill(prompt(config, config.prompt_len), 0).clone() for v in names}

    order = random.Random(ORDER_SEED)
    prefill: dict[str, dict[str, list[float]]] = {v: {str(n): [] for n in lens} for v in names}
    for _ in range(config.prefill_repeats):
        for v in order.sample(names, len(names)):
            for n in lens:
                ids = prompt(config, n)
                start = time.perf_counter()
                int(runners[v].prefill(ids, 0).argmax())
                prefill[v][str(n)].append((time.perf_counter() - start) * 1e3)

    positions = config.decode_positions()
    decode = {
        v: {"positions": positions, "steps_ms": [], "after_switch": [], "tokens": None}
        for v in names
    }
    consistent = dict.fromkeys(names, True)
    for _ in range(config.repeats):
        tokens = {
            v: [int(runners[v].prefill(prompt(config, config.prompt_len), 0).argmax())]
            for v in names
        }
        ms: dict[str, list[float]] = {v: [] for v in names}
        first: dict[str, list[bool]] = {v: [] for v in names}
        for seg in range(0, len(positions), config.segment):
            for v in order.sample(names, len(names)):
                run = runners[v]
                for i, pos in enumerate(positions[seg : seg + config.segment]):
                    start = time.perf_counter()
                    tokens[v].append(int(run.decode(tokens[v][-1], pos).argmax()))
                    ms[v].append((time.perf_counter() - start) * 1e3)
                    first[v].append(i == 0)
        for v in names:
            decode[v]["steps_ms"].append(ms[v])
            decode[v]["after_switch"].append(first[v])
            if decode[v]["tokens"] is None:
                decode[v]["tokens"] = tokens[v]
            elif decode[v]["tokens"] != tokens[v]:
                consistent[v] = False
    return {
        "bandwidth": bandwidth,
        "weight_bytes_per_token": weight_bytes,
        "threads": threads,
        "prefill": prefill,
        "decode": decode,
        "consistent": consistent,
        "logits_max_abs_diff": {
            v: float((logits[v] - logits[generate_variants.EAGER]).abs().max())
            if generate_variants.EAGER in logits
            else None
            for v in names
        },
    }


def warmup_token(i: int, config: GenerateConfig) -> int:
    """The token a warm-up decode step feeds (any valid id)."""
    return (i + 1) % config.spec.dims.vocab_size


def summarize_decode(config: GenerateConfig, d: dict) -> dict:
    """A variant's decode statistics from `time_generations`' "decode" entry: steady steps
    (every step except each segment's first) over every generation: `decode_ms_median`,
    `decode_ms_p10`, `decode_ms_p90`; `end_ms_median`: the median of the steady steps at the
    last `end_steps` positions; `after_switch_ms_median`: the segments' first steps (ms);
    `steady_steps`: how many steps the median is over."""
    end_from = config.max_seq_len - config.end_steps
    steady, end, switch = [], [], []
    for ms_row, first_row in zip(d["steps_ms"], d["after_switch"]):
        for pos, ms, first in zip(d["positions"], ms_row, first_row):
            if first:
                switch.append(ms)
                continue
            steady.append(ms)
            if pos >= end_from:
                end.append(ms)
    stats = measure.summarize(steady) if steady else dict.fromkeys(measure.summarize([0.0]))
    return {
        "decode_ms_median": stats["step_ms_median"],
        "decode_ms_p10": stats["step_ms_p10"],
        "decode_ms_p90": stats["step_ms_p90"],
        "end_ms_median": statistics.median(end) if end else None,
        "after_switch_ms_median": statistics.median(switch) if switch else None,
        "steady_steps": len(steady),
    }


def compare_tokens(tokens: list[int], reference: list[int]) -> dict:
    """{"tokens_equal": bool, "first_divergence": index of the first differing token (0 = the
    prefill's token, i = the token decoded at position prompt_len + i - 1) or None,
    "tokens_compared": count}."""
    n = min(len(tokens), len(reference))
    diverge = next((i for i in range(n) if tokens[i] != reference[i]), None)
    if diverge is None and len(tokens) != len(reference):
        diverge = n
    return {"tokens_equal": diverge is None, "first_divergence": diverge, "tokens_compared": n}
