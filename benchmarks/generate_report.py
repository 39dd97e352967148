"""The generation benchmark's table, `generate_bench.json` and plot.

A row (one per variant) has: `variant`, `description`, `engine` / `decode_delegates` (what
runs its decode step, read off its program), the decode statistics over whole generations
(`decode_ms_median`, `decode_ms_p10`, `decode_ms_p90`, `end_ms_median`,
`after_switch_ms_median` in ms, `steady_steps`; `tok_s_median`, `tok_s_end` = 1000 / ms),
`roofline_fraction_median` / `roofline_fraction_end` (the roofline's ms per token / the
step's), `prefill_ms` ({prompt length: median ms to the first token}) and
`prefill_ms_samples`, the export (`export_s`, `convert_s` in s; `export_peak_rss_mb`,
`export_peak_tree_pss_mb` (with its partition build workers), `export_baseline_rss_mb` in MB;
`program_bytes`, and `data_bytes`: the `.ptd`'s, None when the
weights are in the `.pte`), the tokens (`tokens`, `tokens_equal`,
`first_divergence`, `tokens_compared`, `generations_consistent`; `logits_max_abs_diff`: the
largest absolute difference from eager's logits at the prompt's last position), every step time
(`steps_ms`: per generation, one per position of `settings.decode_positions`; `after_switch`:
which of them were a segment's first) and `error` (None, or why the row has no numbers).
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Sequence

from benchmarks import report

JSON_NAME = "generate_bench.json"
PLOT_NAME = "generate_bench.png"


def _export_rss(r: dict) -> str:
    """The export process's peak RSS / the peak memory with its partition build workers."""
    tree = r.get("export_peak_tree_pss_mb")
    main = f"{r['export_peak_rss_mb']:.0f}"
    return f"{main} / {tree:.0f}" if tree else main


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _rate(ms: float | None) -> str:
    return "-" if not ms else f"{1e3 / ms:.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _tokens(r: dict) -> str:
    if r.get("tokens_equal") is None:
        return "-"
    if r["tokens_equal"]:
        return f"equal ({r['tokens_compared']})"
    return f"differ from token {r['first_divergence']} of {r['tokens_compared']}"


def _diff(v: float | None) -> str:
    return "-" if v is None else f"{v:.1e}"


def table(rows: Sequence[dict], meta: dict) -> str:
    """The text table: header lines (model, machine, settings, roofline), one line per row
    (failed rows say why)."""
    lens = [str(n) for n in meta["settings"]["effective_prefill_lens"]]
    cols = [
        "variant",
        "engine",
        "decode ms",
        "tok/s",
        "end ms",
        "end tok/s",
        "roofline",
        "end roofline",
        *[f"prefill {n} ms" for n in lens],
        "export s",
        "export RSS / +workers MB",
        ".pte",
        ".ptd",
        "tokens vs eager",
        "logits vs eager",
    ]
    body = []
    for r in rows:
        if r.get("error"):
            body.append([r["variant"], r.get("engine") or "-", f"FAILED: {r['error']}"])
            continue
        exported = r.get("export_s") is not None
        body.append(
            [
                r["variant"],
                r.get("engine") or "-",
                _ms(r["decode_ms_median"]),
                _rate(r["decode_ms_median"]),
                _ms(r["end_ms_median"]),
                _rate(r["end_ms_median"]),
                _pct(r["roofline_fraction_median"]),
                _pct(r["roofline_fraction_end"]),
                *[_ms(r["prefill_ms"].get(n)) for n in lens],
                f"{r['export_s']:.1f}" if exported else "-",
                _export_rss(r) if exported else "-",
                report.format_bytes(r.get("program_bytes")),
                report.format_bytes(r.get("data_bytes")),
                _tokens(r),
                _diff(r.get("logits_max_abs_diff")),
            ]
        )
    return "\n".join(header(meta) + report.aligned_table(cols, body))


def header(meta: dict) -> list[str]:
    """Header lines from a run's metadata (generate_bench.json minus its rows)."""
    host, st, roof = meta["machine"], meta["settings"], meta.get("roofline") or {}
    lens = ", ".join(str(n) for n in st["effective_prefill_lens"])
    lines = [
        f"model: {meta['model']['description']}",
        (
            f"machine: {host['cpu']}, {host['cpus']} CPUs, {st['threads']} threads "
            f"(torch {host['torch']}, executorch {host['executorch']})"
        ),
        (
            f"static cache {st['max_seq_len']} positions; prompt {st['prompt_len']} tokens, then "
            f"greedy decode at positions {st['prompt_len']}..{st['max_seq_len'] - 1}; "
            f"{st['repeats']} generation(s) per variant, interleaved in segments of "
            f"{st['segment']} steps (each segment's first step left out); 'end' = median of the "
            f"last {st['end_steps']} positions"
        ),
        (
            f"prefill: time to first token (call + argmax) for {lens}-token prompts, median of "
            f"{st['prefill_repeats']} after one warm-up; export: own process each, peak RSS = "
            "its ru_maxrss / the sampled Pss of it and its partition build workers"
        ),
    ]
    if roof.get("min_ms_per_token"):
        lines.append(
            f"roofline: {roof['weight_bytes_per_token'] / (1 << 20):.1f} MiB of weights per "
            f"token / {roof['bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s measured "
            f"({roof['bandwidth']['method']}) = {roof['min_ms_per_token']:.2f} ms/token "
            f"({1e3 / roof['min_ms_per_token']:.1f} tok/s); 'roofline' = that / the step"
        )
    return [*lines, ""]


def write_json(path: str, rows: Sequence[dict], meta: dict) -> None:
    """Writes `{**meta, "rows": [...]}` to `path`."""
    with open(path, "w") as f:
        json.dump({**meta, "rows": list(rows)}, f, indent=2)
        f.write("\n")


def per_position_ms(r: dict) -> list[float]:
    """The median over generations of each position's step time (ms), one per position."""
    return [statistics.median(col) for col in zip(*r["steps_ms"])]


def write_plot(path: str, rows: Sequence[dict], meta: dict) -> None:
    """Decode step time (ms, median over generations, each segment's first step dropped)
    against the position, one line per variant, and the roofline as a dashed line
    (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions = meta["settings"]["decode_positions"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in rows:
        if r.get("error") or not r.get("steps_ms"):
            continue
        ys = per_position_ms(r)
        first = r["after_switch"][0]
        pts = [(p, y) for p, y, f in zip(positions, ys, first) if not f]
        ax.plot([p for p, _ in pts], [y for _, y in pts], label=r["variant"], linewidth=1)
    roof = meta.get("roofline") or {}
    if roof.get("min_ms_per_token"):
        ax.axhline(roof["min_ms_per_token"], linestyle="--", color="gray", label="roofline")
    ax.set_xlabel("position of the decode step")
    ax.set_ylabel("decode step, ms")
    ax.set_ylim(bottom=0)
    ax.set_title(textwrap.fill(meta["model"]["description"], 120), fontsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
