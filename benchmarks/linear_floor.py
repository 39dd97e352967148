"""The linear floor of a decode step (or of a prompt): the model's linear layers alone through
XNNPACK, timed next to the memory roofline and next to PyTorch running the same linears.

    ./bazelw run //benchmarks:linear_floor -- [--model tiny|smollm-135m|qwen2.5-0.5b] [--tokens N]
        [--threads N] [--steps N] [--bandwidth-mib N] [--json FILE]

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

With `--tokens N` (default 1) the linears run on N tokens, as a prefill of an N-token prompt
runs them (the output layer on the last token only, as `generate` prefills): a GEMM, bound by
the CPU's arithmetic rather than by the weights' bytes. The same module is timed in eager
PyTorch (its own GEMM, the same threads) as well, so a prompt's floor through XNNPACK can be
set against eager's whole prefill (`generate`'s "prefill N ms").

Prints and (with `--json`) writes: `model`, `tokens`, `threads` (in effect), `linears`,
`weight_bytes`
(bytes of the linears' weights), `roofline_weight_bytes` (`roofline.weight_bytes_per_token`),
`program_bytes` (the `.pte`, which holds those weights), `xnnpack_delegates`,
`undelegated_linears` (linear / matmul nodes left outside XNNPACK: 0, or
the floor is not XNNPACK's), `export_s`, `floor_ms_median` / `floor_ms_p10` (ms per call over
`--steps` calls after 5 untimed), `bandwidth_bytes_per_s` (read + written / s, the fastest of
10 copies of `--bandwidth-mib` MiB), `roofline_ms` (roofline weight bytes / bandwidth) and
`floor_roofline_fraction` (`roofline_ms / floor_ms_median`, as `generate` reports a variant's;
the roofline is one token's, so with N tokens it says little), `flops` (2 * weights * tokens
of every layer's linears, plus the output layer's once), `floor_gflop_s` (`flops` / the floor),
`eager_ms_median` / `eager_ms_p10` (the same module in PyTorch, ms per call) and
`eager_gflop_s`. `--steps` defaults to 200 calls for one token, 10 for more.
Exit 0 when measured, 1 when a linear stayed outside XNNPACK, 2 for a bad flag.
"""

from __future__ import annotations

import argparse
import json
import os
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
    weights), called as a decode step (one token) or a prefill (several) calls them.
    `forward(x[1, T, hidden])` returns the output layer's logits of the last token and each
    layer's k and v projections (so none is dead code)."""

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
        if h.shape[1] > 1:
            h = h[:, -1:]  # a prefill computes the last token's logits only
        return (self.lm_head(h), *kv)


def undelegated_linears(graph_module: torch.fx.GraphModule) -> int:
    """How many linear / matrix-product nodes `graph_module`'s graph calls itself (outside any
    delegate)."""
    return sum(
        1
        for n in graph_module.graph.nodes
        if n.op == "call_function" and schema_name(n) in _LINEARS
    )


def linear_flops(module: DecoderLinears, tokens: int) -> int:
    """Floating-point operations (a multiply and an add each) of `module`'s linears on `tokens`
    tokens: every layer's on each token, the output layer's on the last one."""
    per_token = sum(2 * m.weight.numel() for m in module.layers.modules() if _is_linear(m))
    return per_token * tokens + 2 * module.lm_head.weight.numel()


def _is_linear(m: torch.nn.Module) -> bool:
    return isinstance(m, torch.nn.Linear)


def _time_calls(call, steps: int) -> dict:
    """`measure.summarize` of `steps` calls of `call()` (ms), after `_UNTIMED_CALLS` untimed."""
    for _ in range(_UNTIMED_CALLS):
        call()
    return measure.summarize([measure.time_step(call) for _ in range(steps)])


def run(model_name: str, threads: int, steps: int, bandwidth_mib: int, tokens: int = 1) -> dict:
    """Builds, exports and times model `model_name`'s linears (module docstring); returns the
    result dict the docstring lists."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.utils import get_delegates
    from executorch.runtime import Runtime

    spec = MODELS[model_name]
    model = spec.build(max_seq_len=64)
    module = DecoderLinears(model).eval()
    linears = [m for m in module.modules() if _is_linear(m)]
    weights = {m.weight.data_ptr(): m.weight for m in linears}
    x = torch.randn(1, tokens, spec.dims.hidden_size, generator=torch.Generator().manual_seed(0))
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
        times = _time_calls(lambda: method.execute([x]), steps)
    with torch.no_grad():
        eager_times = _time_calls(lambda: module(x), steps)
    bandwidth = roofline.measure_bandwidth(bandwidth_mib, _BANDWIDTH_REPEATS, threads)
    roofline_bytes = roofline.weight_bytes_per_token(model)
    roofline_ms = roofline_bytes / bandwidth["bytes_per_s"] * 1e3
    median = times["step_ms_median"]
    eager_median = eager_times["step_ms_median"]
    flops = linear_flops(module, tokens)
    return {
        "model": model_name,
        "tokens": tokens,
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
        "floor_ms_p10": times["step_ms_p10"],
        "bandwidth_bytes_per_s": bandwidth["bytes_per_s"],
        "roofline_ms": roofline_ms,
        "floor_roofline_fraction": roofline_ms / median,
        "flops": flops,
        "floor_gflop_s": flops / median / 1e6,
        "eager_ms_median": eager_median,
        "eager_ms_p10": eager_times["step_ms_p10"],
        "eager_gflop_s": flops / eager_median / 1e6,
    }


def format_result(result: dict) -> str:
    r, mib = result, 1 << 20
    program = (
        f"{r['model']}: {r['linears']} linears, {r['weight_bytes'] / mib:.1f} MiB of weights, "
        f"{r['xnnpack_delegates']} XNNPACK delegates, {r['undelegated_linears']} linears "
        f"outside XNNPACK, exported in {r['export_s']:.1f} s"
    )
    floor = (
        f"linear floor: {r['floor_ms_median']:.2f} ms per call of {r['tokens']} token(s) "
        f"(median of {r['steps']}; p10 {r['floor_ms_p10']:.2f} ms), {r['threads']} threads, "
        f"{r['floor_gflop_s']:.1f} GFLOP/s"
    )
    eager = (
        f"eager PyTorch, the same linears: {r['eager_ms_median']:.2f} ms (p10 "
        f"{r['eager_ms_p10']:.2f} ms), {r['eager_gflop_s']:.1f} GFLOP/s; XNNPACK / eager = "
        f"{r['floor_ms_median'] / r['eager_ms_median']:.2f}"
    )
    bound = (
        f"roofline: {r['roofline_weight_bytes'] / mib:.1f} MiB / "
        f"{r['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copy bandwidth = {r['roofline_ms']:.2f} "
        f"ms per token; the floor is at {r['floor_roofline_fraction']:.0%} of it"
    )
    # The roofline is one token's weight bytes: a prompt's GEMM is bound by arithmetic instead.
    return "\n".join([program, floor, eager] + ([bound] if r["tokens"] == 1 else []))


def _count(flag: str):
    return lambda text: command_line.positive_int(flag, text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", choices=sorted(MODELS), default="smollm-135m")
    p.add_argument("--threads", type=_count("--threads"), default=2)
    p.add_argument(
        "--tokens", type=_count("--tokens"), default=1, help="tokens per call (a prompt's length)"
    )
    p.add_argument(
        "--steps", type=_count("--steps"), help="timed calls (default 200 for one token, 10 else)"
    )
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
    steps = args.steps or (200 if args.tokens == 1 else 10)
    result = run(args.model, args.threads, steps, args.bandwidth_mib, args.tokens)
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
