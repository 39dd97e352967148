"""How long exporting a decoder takes, and where the time goes.

    ./bazelw run //benchmarks:export_time -- [--model tiny|smollm-135m|qwen2.5-0.5b]
        [--path export|export_llm] [--out FILE.pte] [--json FILE] [--profile FILE.prof]

Builds the seeded decoder (`decoder_model.build_model`), exports it and prints the wall time of
each phase (`export_phases`), the total export time, the peak RSS of the process, the peak
memory of the process with its partition build workers (`process_memory`; with
`EXECUTORCH_TRT_BUILD_WORKERS=1` the partitions build in the process) and the size
and SHA-256 of the `.pte` (equal digests: the same program).

* `--path export` (default): `torch.export` of `prefill` (64 tokens; 4 for tiny) and `decode`
  (1 token) as the decode benchmark does (`benchmarks/workload.py`), then
  `executorch_trt.export` as its `delegate_inplace` variant does (`variants.build_delegate`).
* `--path export_llm`: `executorch_trt.llm.export_llm` on the same model (one dynamic
  `forward`, its metadata methods).

`--profile` also writes a cProfile of the export (not of building the model); its times are
inflated by the profiler, the phase table's are not.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import json
import os
import resource
import sys
import time
from collections.abc import Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from benchmarks.bench_config import QUICK_DIMS
from benchmarks.export_phases import PhaseRow, PhaseTimer
from benchmarks.generate_config import QWEN25_05B, SMOLLM_135M
from benchmarks.process_memory import PeakTreePss

#: Capacity of the static cache (positions).
MAX_SEQ_LEN = 512


@dataclasses.dataclass(frozen=True)
class ExportModel:
    """A decoder to export: `build_model` overrides and the prefill length."""

    overrides: dict[str, int | bool | float]
    prompt_len: int


MODELS: dict[str, ExportModel] = {
    # The decode benchmark's quick model (1 layer, hidden 64, vocab 128).
    "tiny": ExportModel(dataclasses.asdict(QUICK_DIMS), prompt_len=4),
    # SmolLM-135M's shape, as the generation benchmark builds it (seeded random weights).
    "smollm-135m": ExportModel(SMOLLM_135M.overrides(), prompt_len=64),
    "qwen2.5-0.5b": ExportModel(QWEN25_05B.overrides(), prompt_len=64),
}


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _export_methods(module: torch.nn.Module, model: ExportModel, timer: PhaseTimer):
    """`torch.export`s of `prefill` and `decode` (`workload.export_methods`' inputs)."""
    generator = torch.Generator().manual_seed(1)
    vocab = int(model.overrides["vocab_size"])
    ids = torch.randint(0, vocab, (1, model.prompt_len), generator=generator, dtype=torch.long)
    with timer.phase("torch.export"), torch.no_grad():
        prefill = torch.export.export(
            module, (ids, torch.arange(model.prompt_len, dtype=torch.long)), strict=False
        )
        decode = torch.export.export(
            module,
            (torch.tensor([[1]], dtype=torch.long), torch.tensor([model.prompt_len])),
            strict=False,
        )
    return {"prefill": prefill, "decode": decode}


def run(model_name: str, path: str, profile: str | None = None) -> dict:
    """Exports `model_name` along `path`; returns the result (`main` prints it)."""
    import executorch_trt
    from decoder_model import build_model, exportable_decoder

    model = MODELS[model_name]
    timer = PhaseTimer()
    with timer.phase("build model"):
        hf_model = build_model(MAX_SEQ_LEN, **model.overrides)
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    with timer.instrument(), PeakTreePss() as memory:
        if path == "export":
            methods = _export_methods(exportable_decoder(hf_model, MAX_SEQ_LEN), model, timer)
            with timer.phase("executorch_trt.export"), torch.no_grad():
                manager = executorch_trt.export(
                    methods,
                    kv_cache="inplace",
                    emit_mutable_buffer_names=True,
                    require_inplace=True,
                )
        else:
            from executorch_trt.llm import export_llm

            with timer.phase("export_llm"):
                manager = export_llm(hf_model, model.prompt_len, max_context_len=MAX_SEQ_LEN)
        with timer.phase(".pte bytes"):
            pte = manager.buffer
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    return {
        "model": model_name,
        "path": path,
        "phases": [dataclasses.asdict(r) for r in timer.rows()],
        "export_seconds": total,
        "export_cpu_seconds": total_cpu,
        "peak_rss_mib": _peak_rss_mib(),
        # With the partition build workers (backend/partition_builds.py): Pss, sampled.
        "peak_tree_pss_mib": memory.peak_mib,
        "pte_bytes": len(pte),
        "pte_sha256": hashlib.sha256(pte).hexdigest(),
        "_pte": pte,
    }


def format_table(result: dict) -> str:
    """The phase table: one line per phase, indented by depth, seconds, self seconds, calls."""
    lines = [f"{'phase':<60} {'seconds':>8} {'self':>8} {'cpu':>8} {'calls':>6}"]
    for row in (PhaseRow(**r) for r in result["phases"]):
        name = "  " * (len(row.path) - 1) + row.path[-1]
        lines.append(
            f"{name:<60} {row.seconds:8.2f} {row.self_seconds:8.2f} {row.cpu_seconds:8.2f} "
            f"{row.calls:6d}"
        )
    lines += [
        (
            f"export total (torch.export through .pte bytes): {result['export_seconds']:.2f} s "
            f"(CPU {result['export_cpu_seconds']:.2f} s)"
        ),
        (
            f"peak RSS: {result['peak_rss_mib']:.0f} MiB (this process); peak memory with the "
            f"partition build workers: {result['peak_tree_pss_mib']:.0f} MiB (Pss, sampled)"
        ),
        f".pte: {result['pte_bytes']} bytes, sha256 {result['pte_sha256']}",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", choices=sorted(MODELS), default="tiny")
    p.add_argument("--path", choices=("export", "export_llm"), default="export")
    p.add_argument("--out", help="write the .pte here")
    p.add_argument("--json", help="write the result (phases, totals) here as JSON")
    p.add_argument("--profile", help="write a cProfile of the export here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result = run(args.model, args.path, args.profile)
    pte = result.pop("_pte")
    if args.out:
        with open(args.out, "wb") as f:
            f.write(pte)
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
