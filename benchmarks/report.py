"""Turning measured rows into the table, `decode_bench.json`, the plot and the target checks.

A row is a dict with the JSON fields: `variant`, `max_seq_len`, `step_ms_median`,
`step_ms_p10`, `step_ms_p90` (ms), `runtime_bytes_copied_per_step` (bytes), `peak_rss_mb` (MB),
plus the breakdown (`cache_bytes_copied_per_step`, `other_bytes_copied_per_step`,
`delegate_bytes_copied_per_step`, `functional_cache_update_bytes_per_step`, `cache_nbytes`,
`baseline_rss_mb`, `threads`), the C++ timing of the same decode step (`step_ms_cpp_median`,
`step_ms_cpp_p10`, `step_ms_cpp_p90`, `step_ms_cpp_samples` in ms, `cpp_threads`; None for the
variants not timed in C++, and in JSON written before it existed), `cpp_error` (None, or why
the C++ timing failed), `step_ms_after_switch_median` / `step_ms_after_switch_samples` (ms:
the first of a variant's steps in each round, right after another variant's; None in JSON
written before the lead-in existed), what runs the decode step, read off the variant's
program (`engine`, e.g. "portable, CPU", "XnnpackBackend", "no delegate"; `decode_delegates`,
e.g. "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program with XNNPACK, on
the CPU)"; `cpp_engine` for the C++ timing; absent in JSON written before they existed) and
`error` (None, or why the row has no numbers).
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence

JSON_NAME = "decode_bench.json"
PLOT_NAME = "decode_bench.png"
EAGER = "eager"
PLAIN = ("executorch_default", "executorch_reinplace", "executorch_xnnpack")
INPLACE = "delegate_inplace"
COPY_BACK = "delegate_copy_back"
EXTERNAL = "delegate_external"
#: The size targets: a program holds its weights once (+ a fixed overhead); with external
#: weights the .pte is small and the .ptd is the weights; the delegate's memory over the
#: worker's baseline is at most plain ExecuTorch's + 5%.
MAX_PROGRAM_WEIGHTS_RATIO, MAX_PROGRAM_OVERHEAD = 1.05, 256 * 1024
MAX_EXTERNAL_PTE = 256 * 1024
MAX_PTD_WEIGHTS_RATIO = 1.02
MAX_RSS_RATIO = 1.05
#: The speed targets: in-place at most as slow as eager and as every plain ExecuTorch variant
#: at every capacity, at most 0.6x eager at EAGER_RATIO_AT positions, and its step time grows at
#: most MAX_GROWTH from the smallest to the largest capacity.
MAX_RATIO = 1.00
MAX_EAGER_RATIO = 1.00
EAGER_RATIO_AT, MAX_EAGER_RATIO_AT = 4096, 0.60
MAX_GROWTH = 1.30
GROWTH_MAX_WIDTH = 0.10  # widest 90% interval of the relative growth that still decides


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def aligned_table(cols: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """The header, a rule and the rows, columns padded to their widest cell. A row of fewer
    cells than `cols` (a failed variant: its label cells, then one message) has its label cells
    aligned and the message after them."""
    widths = [
        max([len(c)] + [len(b[i]) for b in body if len(b) == len(cols)]) for i, c in enumerate(cols)
    ]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        if len(b) == len(cols):
            lines.append("  ".join(v.ljust(w) for v, w in zip(b, widths)))
        else:
            lines.append("  ".join(v.ljust(w) for v, w in zip(b[:-1], widths)) + f"  {b[-1]}")
    return lines


def format_bytes(v: float | None) -> str:
    """Bytes as a table cell: "-", "N B", "N.N KiB" or "N.NN MiB"."""
    if v is None:
        return "-"
    if v >= 1 << 20:
        return f"{v / (1 << 20):.2f} MiB"
    if v >= 1 << 10:
        return f"{v / (1 << 10):.1f} KiB"
    return f"{v:.0f} B"


def _fmt_cpp(r: dict) -> str:
    """The "C++ median ms" cell: the median (ms), "failed" (see the notes under the table) or
    "-" (not timed in C++)."""
    return "failed" if r.get("cpp_error") else _fmt_ms(r.get("step_ms_cpp_median"))


def table(rows: Sequence[dict], header: Sequence[str]) -> str:
    """The text table: `header` lines, then one line per row (failed rows say why), then one
    note per failed C++ timing."""
    cols = (
        "variant",
        "engine",
        "max_seq_len",
        "median ms",
        "p10 ms",
        "p90 ms",
        "C++ median ms",
        "copied/step",
        "of which cache",
        "peak RSS MB",
        "over baseline MB",
        ".pte",
        ".ptd",
    )
    lines = list(header)
    body = []
    for r in rows:
        engine = r.get("engine") or "-"  # "-": JSON written before the field existed
        if r.get("error"):
            body.append((r["variant"], engine, str(r["max_seq_len"]), f"FAILED: {r['error']}"))
            continue
        body.append(
            (
                r["variant"],
                engine,
                str(r["max_seq_len"]),
                _fmt_ms(r["step_ms_median"]),
                _fmt_ms(r["step_ms_p10"]),
                _fmt_ms(r["step_ms_p90"]),
                _fmt_cpp(r),
                format_bytes(r["runtime_bytes_copied_per_step"]),
                format_bytes(r["cache_bytes_copied_per_step"]),
                f"{r['peak_rss_mb']:.0f}",
                f"{r['peak_rss_mb'] - r['baseline_rss_mb']:.0f}",
                format_bytes(r.get("program_bytes")),
                format_bytes(r.get("data_bytes")),
            )
        )
    lines += aligned_table(cols, body)
    lines += [
        f"C++ timing of {r['variant']} at {r['max_seq_len']} failed: {r['cpp_error']}"
        for r in rows
        if r.get("cpp_error")
    ]
    return "\n".join(lines)


def engines_block(rows: Sequence[dict]) -> list[str]:
    """Header lines naming what runs each variant's decode step (its `decode_delegates`, read
    off its program), one per variant in row order; none for rows written before the field
    existed."""
    what = {}
    for r in rows:
        if r.get("decode_delegates"):
            what.setdefault(r["variant"], r["decode_delegates"])
    if not what:
        return []
    width = max(len(v) for v in what)
    return ["what runs each decode step (read from each variant's program):"] + [
        f"  {v.ljust(width)}  {d}" for v, d in what.items()
    ]


def write_json(path: str, rows: Sequence[dict], meta: dict) -> None:
    """Writes `{"rows": [...], **meta}` (meta: model, machine, settings) to `path`."""
    with open(path, "w") as f:
        json.dump({**meta, "rows": list(rows)}, f, indent=2)
        f.write("\n")


def write_plot(path: str, rows: Sequence[dict], title: str) -> None:
    """Median step time (ms) against cache capacity, p10-p90 as error bars, one line per
    variant, plus a dashed one per variant timed in C++ (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant in dict.fromkeys(r["variant"] for r in rows):
        ok = sorted(
            (r for r in rows if r["variant"] == variant and not r.get("error")),
            key=lambda r: r["max_seq_len"],
        )
        if not ok:
            continue
        xs = [r["max_seq_len"] for r in ok]
        ys = [r["step_ms_median"] for r in ok]
        err = [
            [y - r["step_ms_p10"] for y, r in zip(ys, ok)],
            [r["step_ms_p90"] - y for y, r in zip(ys, ok)],
        ]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=variant)
        cpp = [r for r in ok if r.get("step_ms_cpp_median") is not None]
        if cpp:
            ys = [r["step_ms_cpp_median"] for r in cpp]
            err = [
                [y - r["step_ms_cpp_p10"] for y, r in zip(ys, cpp)],
                [r["step_ms_cpp_p90"] - y for y, r in zip(ys, cpp)],
            ]
            ax.errorbar(
                [r["max_seq_len"] for r in cpp],
                ys,
                yerr=err,
                marker="s",
                linestyle="--",
                capsize=3,
                label=f"{variant} (C++)",
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("KV cache capacity (positions)")
    ax.set_ylabel("decode step, median ms (bars: p10-p90)")
    ax.set_title(title, fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _medians(rows: Sequence[dict], variant: str) -> dict[int, float]:
    return {
        r["max_seq_len"]: r["step_ms_median"]
        for r in rows
        if r["variant"] == variant and not r.get("error")
    }


def _samples(rows: Sequence[dict], variant: str) -> dict[int, list[float]]:
    return {
        r["max_seq_len"]: r["step_ms_samples"]
        for r in rows
        if r["variant"] == variant and not r.get("error")
    }


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over timing rounds of a[i] / b[i]: variant a's step time relative to b's, both
    timed in the same round of the same process (measure.time_interleaved). Pairing by round
    cancels the machine's slow and fast phases, which both variants share; the ratio of the
    two medians does not (on the 2-CPU machine the step time jumps between two levels ~1.5x
    apart for seconds at a time, and a median of such a distribution is unstable)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired samples need equal, non-zero lengths; got {len(a)}, {len(b)}")
    return statistics.median([x / y for x, y in zip(a, b)])


def relative_growth(
    a_lo, b_lo, a_hi, b_hi, resamples: int = 2000, level: float = 0.90
) -> tuple[float, float, float]:
    """How much more a's step time grows than b's from the low to the high capacity:
    paired_ratio(a_hi, b_hi) / paired_ratio(a_lo, b_lo) (1.0 = the same growth), with a
    `level` bootstrap interval (rounds resampled with replacement, each capacity on its own:
    they were timed in different processes; fixed seed, so reruns on the same data agree).
    Returns (estimate, low, high)."""
    rng = random.Random(0)
    est = paired_ratio(a_hi, b_hi) / paired_ratio(a_lo, b_lo)

    def resample(a, b):
        idx = [rng.randrange(len(a)) for _ in a]
        return [a[i] for i in idx], [b[i] for i in idx]

    boots = sorted(
        paired_ratio(*resample(a_hi, b_hi)) / paired_ratio(*resample(a_lo, b_lo))
        for _ in range(resamples)
    )
    tail = (1.0 - level) / 2
    return est, boots[int(tail * (resamples - 1))], boots[int((1 - tail) * (resamples - 1))]


def _absent(rows: Sequence[dict], variant: str) -> str | None:
    """Why `variant` has no numbers: "not selected", "<variant> failed", or None (it ran)."""
    mine = [r for r in rows if r["variant"] == variant]
    if not mine:
        return f"{variant} not selected"
    if any(r.get("error") for r in mine):
        return f"{variant} failed"
    return None


def check_targets(rows: Sequence[dict]) -> list[tuple[str, bool | None, str]]:
    """The issue's targets as (name, met?, detail); met? is None when not measurable (a
    variant not selected or failed, one capacity only, or too few rounds to tell).

    * in-place copies 0 cache bytes per step at every capacity (counted exactly);
    * against *each* plain-ExecuTorch configuration that ran (so against the best one,
      whichever it is in this run):
      - in-place <= MAX_RATIO x its step time at every capacity, by the paired ratio (the
        medians' ratio is shown beside it);
      - in-place growth from the smallest to the largest capacity no worse: MISSED when the
        `relative_growth` interval lies wholly above 1.0 (in-place measurably grows more),
        else N/A when the interval is wider than GROWTH_MAX_WIDTH (too few rounds to tell),
        else MET;
    * against eager PyTorch: in-place <= MAX_EAGER_RATIO x at every capacity and <=
      MAX_EAGER_RATIO_AT x at EAGER_RATIO_AT positions (N/A if not measured), paired ratios;
    * in-place step time at the largest capacity <= MAX_GROWTH x at the smallest (ratio of
      medians: the capacities run in different processes, so there is no pairing);
    * copy_back copies exactly the whole cache each step (its time relative to in-place is
      shown).
    """
    out = []
    name = "delegate in-place copies 0 cache bytes/step"
    why = _absent(rows, INPLACE)
    if why:
        out.append((name, None, why))
    else:
        bad = [
            r["max_seq_len"]
            for r in rows
            if r["variant"] == INPLACE and r["cache_bytes_copied_per_step"] != 0
        ]
        out.append((name, not bad, "at every capacity" if not bad else f"copies at {bad}"))
    si, mi = _samples(rows, INPLACE), _medians(rows, INPLACE)
    out += _eager_targets(rows, si)
    name = f"delegate in-place growth smallest->largest capacity <= {MAX_GROWTH:.2f}x"
    why = _absent(rows, INPLACE)
    if why or len(mi) < 2:
        out.append((name, None, why or "needs two capacities"))
    else:
        lo, hi = min(mi), max(mi)
        out.append(
            (
                name,
                mi[hi] / mi[lo] <= MAX_GROWTH,
                f"{lo}->{hi}: {mi[hi] / mi[lo]:.2f}x ({mi[lo]:.3f} -> {mi[hi]:.3f} ms)",
            )
        )
    for plain in PLAIN:
        ratio_name = f"delegate in-place <= {MAX_RATIO:.2f}x {plain}"
        growth_name = f"delegate in-place growth <= {plain}'s"
        why = _absent(rows, INPLACE) or _absent(rows, plain)
        if why:
            out += [(ratio_name, None, why), (growth_name, None, why)]
            continue
        sb, mb = _samples(rows, plain), _medians(rows, plain)
        common = sorted(set(si) & set(sb))
        ratios = {s: paired_ratio(si[s], sb[s]) for s in common}
        out.append(
            (
                ratio_name,
                max(ratios.values()) <= MAX_RATIO,
                "paired "
                + ", ".join(f"{s}: {r:.2f}x" for s, r in ratios.items())
                + "; medians "
                + ", ".join(f"{mi[s] / mb[s]:.2f}x" for s in common),
            )
        )
        lo, hi = common[0], common[-1]
        if lo == hi:
            out.append((growth_name, None, "needs two capacities"))
            continue
        est, low, high = relative_growth(si[lo], sb[lo], si[hi], sb[hi])
        detail = (
            f"{lo}->{hi}: relative growth {est:.3f} (90% CI {low:.3f}-{high:.3f}; "
            f">1 = grows more); medians {mi[hi] / mi[lo]:.2f}x vs {mb[hi] / mb[lo]:.2f}x"
        )
        if low > 1.0:  # measurably grows more, however wide the interval
            out.append((growth_name, False, detail))
        elif high - low > GROWTH_MAX_WIDTH:
            out.append((growth_name, None, "too few rounds to tell: " + detail))
        else:
            out.append((growth_name, True, detail))
    out += _weights_targets(rows)
    name = "copy_back copies the whole cache each step"
    why = _absent(rows, COPY_BACK)
    if why:
        out.append((name, None, why))
    else:
        cb = [r for r in rows if r["variant"] == COPY_BACK]
        full = all(r["cache_bytes_copied_per_step"] == r["cache_nbytes"] for r in cb)
        sc = _samples(rows, COPY_BACK)
        out.append(
            (
                name,
                full,
                ", ".join(
                    f"{r['max_seq_len']}: {format_bytes(r['cache_bytes_copied_per_step'])} of a "
                    f"{format_bytes(r['cache_nbytes'])} cache"
                    + (
                        f", {paired_ratio(sc[r['max_seq_len']], si[r['max_seq_len']]):.2f}x "
                        "in-place time"
                        if r["max_seq_len"] in si
                        else ""
                    )
                    for r in cb
                ),
            )
        )
    return out


def _weights_targets(rows: Sequence[dict]) -> list[tuple[str, bool | None, str]]:
    """The size targets (``check_targets``), from each row's ``program_bytes`` (.pte),
    ``data_bytes`` (.ptd), ``weights_bytes`` (the model's parameters) and RSS over baseline:

    * in-place ``.pte`` <= MAX_PROGRAM_WEIGHTS_RATIO x weights + MAX_PROGRAM_OVERHEAD at every
      capacity;
    * external ``.pte`` <= MAX_EXTERNAL_PTE and ``.ptd`` <= MAX_PTD_WEIGHTS_RATIO x weights at
      every capacity;
    * in-place peak RSS over the worker's baseline <= MAX_RSS_RATIO x each plain ExecuTorch
      variant's, at every capacity (one line per plain variant that ran).
    """
    out = []
    inplace = [r for r in rows if r["variant"] == INPLACE and not r.get("error")]
    external = [r for r in rows if r["variant"] == EXTERNAL and not r.get("error")]
    name = (
        f"delegate in-place .pte <= {MAX_PROGRAM_WEIGHTS_RATIO:.2f}x weights + "
        f"{format_bytes(MAX_PROGRAM_OVERHEAD)}"
    )
    if not inplace or any(r.get("weights_bytes") is None for r in inplace):
        out.append((name, None, _absent(rows, INPLACE) or "sizes not recorded"))
    else:
        out.append(
            (
                name,
                all(
                    r["program_bytes"]
                    <= MAX_PROGRAM_WEIGHTS_RATIO * r["weights_bytes"] + MAX_PROGRAM_OVERHEAD
                    for r in inplace
                ),
                ", ".join(
                    f"{r['max_seq_len']}: {format_bytes(r['program_bytes'])} = "
                    f"{r['program_bytes'] / r['weights_bytes']:.3f}x weights "
                    f"({format_bytes(r['weights_bytes'])})"
                    for r in inplace
                ),
            )
        )
    pte_name = f"delegate external .pte <= {format_bytes(MAX_EXTERNAL_PTE)}"
    ptd_name = f"delegate external .ptd <= {MAX_PTD_WEIGHTS_RATIO:.2f}x weights"
    if not external or any(r.get("data_bytes") is None for r in external):
        why = _absent(rows, EXTERNAL) or "no .ptd recorded"
        out += [(pte_name, None, why), (ptd_name, None, why)]
    else:
        out.append(
            (
                pte_name,
                all(r["program_bytes"] <= MAX_EXTERNAL_PTE for r in external),
                ", ".join(
                    f"{r['max_seq_len']}: {format_bytes(r['program_bytes'])}" for r in external
                ),
            )
        )
        out.append(
            (
                ptd_name,
                all(
                    r["data_bytes"] <= MAX_PTD_WEIGHTS_RATIO * r["weights_bytes"] for r in external
                ),
                ", ".join(
                    f"{r['max_seq_len']}: {format_bytes(r['data_bytes'])} = "
                    f"{r['data_bytes'] / r['weights_bytes']:.4f}x weights"
                    for r in external
                ),
            )
        )
    over = {r["max_seq_len"]: r["peak_rss_mb"] - r["baseline_rss_mb"] for r in inplace}
    for plain in PLAIN:
        name = f"delegate in-place RSS over baseline <= {MAX_RSS_RATIO:.2f}x {plain}'s"
        theirs = {
            r["max_seq_len"]: r["peak_rss_mb"] - r["baseline_rss_mb"]
            for r in rows
            if r["variant"] == plain and not r.get("error")
        }
        common = sorted(set(over) & set(theirs))
        why = _absent(rows, INPLACE) or _absent(rows, plain)
        if why or not common:
            out.append((name, None, why or "no common capacity"))
            continue
        out.append(
            (
                name,
                all(over[s] <= MAX_RSS_RATIO * theirs[s] for s in common),
                ", ".join(f"{s}: {over[s]:.1f} vs {theirs[s]:.1f} MB" for s in common),
            )
        )
    return out


def _eager_targets(
    rows: Sequence[dict], si: dict[int, list[float]]
) -> list[tuple[str, bool | None, str]]:
    """The two in-place vs eager targets (``check_targets``)."""
    every = f"delegate in-place <= {MAX_EAGER_RATIO:.2f}x eager"
    at = f"delegate in-place <= {MAX_EAGER_RATIO_AT:.2f}x eager at {EAGER_RATIO_AT}"
    why = _absent(rows, INPLACE) or _absent(rows, EAGER)
    if why:
        return [(every, None, why), (at, None, why)]
    se, me = _samples(rows, EAGER), _medians(rows, EAGER)
    mi = _medians(rows, INPLACE)
    common = sorted(set(si) & set(se))
    ratios = {s: paired_ratio(si[s], se[s]) for s in common}
    detail = (
        "paired "
        + ", ".join(f"{s}: {r:.2f}x" for s, r in ratios.items())
        + "; medians "
        + ", ".join(f"{mi[s] / me[s]:.2f}x" for s in common)
    )
    out = [(every, max(ratios.values()) <= MAX_EAGER_RATIO, detail)]
    if EAGER_RATIO_AT in ratios:
        r = ratios[EAGER_RATIO_AT]
        out.append(
            (
                at,
                r <= MAX_EAGER_RATIO_AT,
                f"paired {r:.2f}x; medians {mi[EAGER_RATIO_AT] / me[EAGER_RATIO_AT]:.2f}x",
            )
        )
    else:
        out.append((at, None, f"{EAGER_RATIO_AT} positions not measured"))
    return out


def header(meta: dict) -> list[str]:
    """The table's header lines from a run's metadata (decode_bench.json minus its rows).
    Raises KeyError/TypeError on metadata this benchmark did not write."""
    from benchmarks.bench_config import ModelDims

    host, st = meta["machine"], meta["settings"]
    return [
        f"model: {ModelDims(**meta['model']).describe()}",
        (
            f"machine: {host['cpu']}, {host['cpus']} CPUs, {st['threads']} threads "
            f"(torch {host['torch']}, executorch {host['executorch']})"
        ),
        f"decode step at position {st['decode_position']} after a {st['prompt_len']}-token "
        f"prefill; {st['repeats']} timed steps per variant after {st['warmup']} warm-up"
        + (
            f", each after >= {st['lead_in_ms']:g} ms of the same variant's steps"
            if st.get("lead_in_ms")
            else ""
        ),
        f"timing: {st.get('timing', 'one process per variant')}",
    ] + ([f"C++ timing: {st['cpp_timing']}"] if st.get("cpp_timing") else [])


def after_switch_note(rows: Sequence[dict]) -> str | None:
    """One line, not a target: delegate in-place's median step time right after another
    variant's step (`step_ms_after_switch_median`) at the smallest and largest capacity and its
    growth, so what the neighbours' steps cost it stays visible (benchmarks/README.md, "Why
    the Python rounds grow"). None when that was not measured at two capacities."""
    m = {
        r["max_seq_len"]: r.get("step_ms_after_switch_median")
        for r in rows
        if r["variant"] == INPLACE and not r.get("error")
    }
    m = {s: v for s, v in m.items() if v is not None and v > 0}  # > 0: also not NaN
    if len(m) < 2:
        return None
    lo, hi = min(m), max(m)
    return (
        f"  (not judged) delegate in-place step right after another variant's, growth "
        f"{lo}->{hi}: {m[hi] / m[lo]:.2f}x ({m[lo]:.3f} -> {m[hi]:.3f} ms)"
    )


def format_targets(results) -> str:
    """One line per target: MET / MISSED / N/A, name, detail."""
    label = {True: "MET   ", False: "MISSED", None: "N/A   "}
    return "\n".join(f"  {label[ok]} {name}: {detail}" for name, ok, detail in results)
