"""The linear floor of a decode step: the model's linear layers alone, one token, through
XNNPACK, timed next to the memory roofline.

    ./bazelw run //benchmarks:linear_floor -- [--model tiny|smollm-135m] [--threads N]
        [--steps N] [--bandwidth-mib N] [--json FILE]

A decode step of a float32 decoder reads every weight once; almost all of them are linear
layers, which the delegate's nested program and ExecuTorch's LLM recipe both run as XNNPACK's
float32 GEMV. This builds the benchmark's seeded model (`generate_config.MODELS`), puts its
linears in a plain ExecuTorch program lowered with `XnnpackPartitioner` (each layer's q/k/v/o
and gate/up/down projections on one token, in the order a step runs them, then the output
layer; no norms, RoPE, attention or cache), and times one call of it. What that takes is what
any XNNPACK-based decode step pays for its weights on this machine: the gap between it and a
variant's step (`//benchmarks:generate`) is everything else the step does; the gap between it
and the roofline (`roofline.py`: weight bytes / measured copy bandwidth) is the GEMV's own
distance from the copy bandwidth.

Prints and (with `--json`) writes: `model`, `threads` (in effect), `linears`, `weight_bytes`
(bytes of the linears' weights), `roofline_weight_bytes` (`roofline.weight_bytes_per_token`),
`program_bytes` (the `.pte`, which holds those weights), `xnnpack_delegates`,
`undelegated_linears` (linear / matmul nodes left outside XNNPACK: 0, or
the floor is not XNNPACK's), `export_s`, `floor_ms_median` / `floor_ms_p10` (ms per call over
`--steps` calls after 5 untimed), `bandwidth_bytes_per_s` (read + written / s, the fastest of
10 copies of `--bandwidth-mib` MiB), `roofline_ms` (roofline weight bytes / bandwidth) and
`floor_roofline_fraction` (`roofline_ms / floor_ms_median`, as `generate` reports a variant's).
Exit 0 when measured, 1 when a linear stayed outside XNNPACK, 2 for a bad flag.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F

from benchmarks import command_line, measure, roofline
from benchmarks.generate_config import MODELS
from executorch_trt.graph.operator_support import schema_name

_UNTIMED_CALLS = 5
_BANDWIDTH_REPEATS = 10
_LINEARS = frozenset({"aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul"})


class DecoderLinears(torch.nn.Module):
    """The linear layers of a transformers Llama-shaped causal LM (its own modules, so its own
    weights), called on one token as a decode step calls them. `forward(x[1, 1, hidden])`
    returns the output layer's logits and each layer's k and v projections (so none is dead
    code)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.layers = model.model.layers
        self.lm_head = model.lm_head

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        kv = []
        h = x
        for layer in self.layers:
            attn, mlp = layer.self_attn, layer.mlp
            kv += [attn.k_proj(h), attn.v_proj(h)]
            h = h + attn.o_proj(attn.q_proj(h))
            h = h + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
        return (self.lm_head(h), *kv)


def undelegated_linears(graph_module: torch.fx.GraphModule) -> int:
    """How many linear / matrix-product nodes `graph_module`'s graph calls itself (outside any
    delegate)."""
    return sum(
        1
        for n in graph_module.graph.nodes
        if n.op == "call_function" and schema_name(n) in _LINEARS
    )


def run(model_name: str, threads: int, steps: int, bandwidth_mib: int) -> dict:
    """Builds, exports and times model `model_name`'s linears (module docstring); returns the
    result dict the docstring lists."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.utils import get_delegates
    from executorch.runtime import Runtime

    spec = MODELS[model_name]
    model = spec.build(max_seq_len=64)
    module = DecoderLinears(model).eval()
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    weights = {m.weight.data_ptr(): m.weight for m in linears}
    x = torch.randn(1, 1, spec.dims.hidden_size, generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    with torch.no_grad():
        manager = to_edge_transform_and_lower(
            torch.export.export(module, (x,)), partitioner=[XnnpackPartitioner()]
        )
        graph_module = manager.exported_program().graph_module
        delegates = len(get_delegates(graph_module.graph))
        undelegated = undelegated_linears(graph_module)
        program = manager.to_executorch().buffer
    export_s = time.perf_counter() - start
    in_effect = measure.set_threads(threads, uses_executorch=True)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "linears.pte")
        with open(path, "wb") as f:
            f.write(program)
        method = Runtime.get().load_program(path).load_method("forward")
        for _ in range(_UNTIMED_CALLS):
            method.execute([x])
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            method.execute([x])
            times.append((time.perf_counter() - t) * 1e3)
    bandwidth = roofline.measure_bandwidth(bandwidth_mib, _BANDWIDTH_REPEATS, threads)
    roofline_bytes = roofline.weight_bytes_per_token(model)
    roofline_ms = roofline_bytes / bandwidth["bytes_per_s"] * 1e3
    median = statistics.median(times)
    return {
        "model": model_name,
        "threads": in_effect,
        "linears": len(linears),
        "weight_bytes": sum(w.numel() * w.element_size() for w in weights.values()),
        "roofline_weight_bytes": roofline_bytes,
        "program_bytes": len(program),
        "xnnpack_delegates": delegates,
        "undelegated_linears": undelegated,
        "export_s": export_s,
        "steps": steps,
        "floor_ms_median": median,
        "floor_ms_p10": sorted(times)[len(times) // 10],
        "bandwidth_bytes_per_s": bandwidth["bytes_per_s"],
        "roofline_ms": roofline_ms,
        "floor_roofline_fraction": roofline_ms / median,
    }


def format_result(result: dict) -> str:
    r, mib = result, 1 << 20
    program = (
        f"{r['model']}: {r['linears']} linears, {r['weight_bytes'] / mib:.1f} MiB of weights, "
        f"{r['xnnpack_delegates']} XNNPACK delegates, {r['undelegated_linears']} linears "
        f"outside XNNPACK, exported in {r['export_s']:.1f} s"
    )
    floor = (
        f"linear floor: {r['floor_ms_median']:.2f} ms per token (median of {r['steps']}; p10 "
        f"{r['floor_ms_p10']:.2f} ms), {r['threads']} threads"
    )
    bound = (
        f"roofline: {r['roofline_weight_bytes'] / mib:.1f} MiB / "
        f"{r['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copy bandwidth = {r['roofline_ms']:.2f} "
        f"ms per token; the floor is at {r['floor_roofline_fraction']:.0%} of it"
    )
    return "\n".join([program, floor, bound])


def _count(flag: str):
    return lambda text: command_line.positive_int(flag, text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", choices=sorted(MODELS), default="smollm-135m")
    p.add_argument("--threads", type=_count("--threads"), default=2)
    p.add_argument("--steps", type=_count("--steps"), default=200, help="timed calls")
    p.add_argument(
        "--bandwidth-mib",
        type=_count("--bandwidth-mib"),
        default=512,
        help="copy bandwidth buffer (MiB)",
    )
    p.add_argument("--json", help="write the result here as JSON")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result = run(args.model, args.threads, args.steps, args.bandwidth_mib)
    print(format_result(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if result["undelegated_linears"]:
        print(
            "linear_floor: some linears stayed outside XNNPACK; this is not XNNPACK's floor",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
