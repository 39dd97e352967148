"""The variants the decode benchmark compares, and how each one's program is built.

* `eager`: the PyTorch module itself (transformers StaticCache, written in place).
* `executorch_default`: plain ExecuTorch, no delegate, stock `ExecutorchBackendConfig`
  (the cache is updated out of place by `index_put.out` and written back by `aten::copy_`).
* `executorch_reinplace`: the same with `run_reinplace_pass=True`, ExecuTorch 1.5.1's pass that
  rewrites `index_put` on a mutable buffer into `index_put_` (so the write-back of the cache
  disappears): plain ExecuTorch's best case.
* `executorch_xnnpack`: plain ExecuTorch lowered with ExecuTorch's `XnnpackPartitioner` (the
  stock CPU deployment), finalised with `run_reinplace_pass=True` (its best case: the cache
  update, which XNNPACK does not take, is `index_put_` on the buffer, no write-back).
* `delegate_inplace`: `executorch_trt.export(kv_cache="inplace")`, the delegate's default
  (the portable engine nests XNNPACK delegates, `portable_xnnpack=True`).
* `delegate_copy_back`: `executorch_trt.export(kv_cache="copy_back")`.
* `delegate_external`: `delegate_inplace` with `external_weights=True`: the weights in
  `model.ptd` beside the `.pte` (`data_path`), loaded with `runtime.load(pte, data=ptd)`.

All ExecuTorch programs have two methods, `prefill` and `decode`, sharing one cache
(`share_mutable_buffers=True`), with mutable-buffer names emitted (so copies can be attributed
to the cache).

What runs each program's decode step is read off the program (`executorch_trt.inspect`: a
TensorRTBackend blob names its engine), never assumed from the variant: `BuiltProgram.engine`
and `decode_delegates`.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import traceback
from collections.abc import Sequence

import torch

from benchmarks import copy_accounting, workload
from benchmarks.bench_config import BenchConfig


@dataclasses.dataclass(frozen=True)
class Variant:
    """One row family of the table. `kind` is "eager", "executorch" or "delegate"."""

    name: str
    kind: str
    description: str


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("eager", "eager", "eager PyTorch, static cache"),
        Variant("executorch_default", "executorch", "plain ExecuTorch, default config"),
        Variant("executorch_reinplace", "executorch", "plain ExecuTorch, run_reinplace_pass=True"),
        Variant(
            "executorch_xnnpack",
            "executorch",
            "plain ExecuTorch + XnnpackPartitioner, run_reinplace_pass=True",
        ),
        Variant("delegate_inplace", "delegate", "executorch-trt delegate, kv_cache=inplace"),
        Variant("delegate_copy_back", "delegate", "executorch-trt delegate, kv_cache=copy_back"),
        Variant(
            "delegate_external",
            "delegate",
            "executorch-trt delegate, kv_cache=inplace, external_weights=True",
        ),
    )
}

PLAIN_REINPLACE = {
    "executorch_default": False,
    "executorch_reinplace": True,
    "executorch_xnnpack": True,
}
#: Plain variants lowered with ExecuTorch's XNNPACK partitioner.
PLAIN_XNNPACK = frozenset({"executorch_xnnpack"})
DELEGATE_KV_CACHE = {
    "delegate_inplace": "inplace",
    "delegate_copy_back": "copy_back",
    "delegate_external": "inplace",
}
#: Delegate variants exported with `external_weights=True` (their `.pte` is `program.pte` in a
#: directory of its own, beside `data_path`'s `model.ptd`).
EXTERNAL_WEIGHTS = frozenset({"delegate_external"})


def data_path(variant: str, pte_path: str | None) -> str | None:
    """The external data file (`.ptd`) of `variant`'s program at `pte_path`, or None when the
    variant keeps its weights in the `.pte`."""
    from executorch_trt.format.wire import EXTERNAL_WEIGHTS_TAG

    if variant not in EXTERNAL_WEIGHTS or not pte_path:
        return None
    return os.path.join(os.path.dirname(pte_path), f"{EXTERNAL_WEIGHTS_TAG}.ptd")


@dataclasses.dataclass
class BuiltProgram:
    """A variant's program at one capacity: where its `.pte` is, the copies its decode step
    makes (from the program's instructions), the KV cache buffers it holds ({name: shape},
    float32; what decode_step_cpp binds), what runs its decode step (`engine`, short, e.g.
    "portable, CPU"; `decode_delegates`, the delegates and their engines as the C++ runners
    print them), or why it could not be built (`error`)."""

    variant: str
    max_seq_len: int
    path: str | None = None
    copies: copy_accounting.CopyAccount = dataclasses.field(
        default_factory=copy_accounting.CopyAccount
    )
    cache_shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    weights_bytes: int | None = None  # the model's parameters (shared ones once)
    engine: str | None = None
    decode_delegates: str | None = None
    error: str | None = None


#: What runs the eager variant's step: no program to read.
EAGER_ENGINE = "eager PyTorch"
EAGER_DECODE = "no program: the PyTorch module itself, on the CPU"


def decode_engine(manager) -> tuple[str, str]:
    """(short label, description) of what runs the decode method of `manager`'s program, read
    off it: the engines of its TensorRTBackend delegates ("portable, CPU"), then the ids of its
    other backends ("XnnpackBackend"), else "no delegate"; and `MethodReport.delegate_summary`
    ("1 TensorRTBackend delegate, engine portable (nested ExecuTorch program with XNNPACK, on
    the CPU)")."""
    import executorch_trt
    from executorch_trt.format.wire import BACKEND_ID

    decode = executorch_trt.inspect(manager).method("decode")
    others = dict.fromkeys(d.backend for d in decode.delegates if d.backend != BACKEND_ID)
    label = "; ".join(list(decode.engine_labels) + list(others)) or "no delegate"
    return label, decode.delegate_summary


def plain_backend_config(reinplace: bool):
    """`ExecutorchBackendConfig` of the plain-ExecuTorch rows (optionally with the reinplace
    pass); caches shared across methods like the delegate's programs.

    The caches are left uninitialised (ExecuTorch's default): in ExecuTorch 1.5.1 a plain
    two-method program whose mutable buffers carry `et_init_buffer` fails to load its second
    method ("offset index 12 out of range >= 6" in program.cpp). The worker fills every cache
    position before timing instead (`measure.fill_cache`), in every variant alike.
    """
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    return ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True),
        emit_mutable_buffer_names=True,
        run_reinplace_pass=reinplace,
    )


def build_plain(methods, names: Sequence[str]):
    """{variant: ExecutorchProgramManager} for the plain-ExecuTorch `names`; each edge program
    (without / with `XnnpackPartitioner`) is lowered once and deep-copied per configuration
    (`to_executorch` mutates it)."""
    from executorch.exir import to_edge_transform_and_lower

    out = {}
    with torch.no_grad():
        for xnnpack in (False, True):
            mine = [n for n in names if (n in PLAIN_XNNPACK) == xnnpack]
            if not mine:
                continue
            partitioner = []
            if xnnpack:
                from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
                    XnnpackPartitioner,
                )

                partitioner = [XnnpackPartitioner()]
            edge = to_edge_transform_and_lower(copy.deepcopy(methods), partitioner=partitioner)
            for name in mine:
                out[name] = copy.deepcopy(edge).to_executorch(
                    plain_backend_config(PLAIN_REINPLACE[name])
                )
    return out


def build_delegate(methods, name: str):
    """The ExecutorchProgramManager of delegate variant `name` (`executorch_trt.export`). The
    in-place variant is exported with `require_inplace=True`: a state buffer that would be
    copied back fails the export instead of skewing the comparison."""
    import executorch_trt

    kv_cache = DELEGATE_KV_CACHE[name]
    with torch.no_grad():
        return executorch_trt.export(
            dict(methods),
            kv_cache=kv_cache,
            emit_mutable_buffer_names=True,
            require_inplace=kv_cache == "inplace",
            external_weights=name in EXTERNAL_WEIGHTS,
        )


def _short_error(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last if len(last) <= 400 else last[:400] + "..."


def _save(built: BuiltProgram, manager, out_dir: str, cache_shapes) -> None:
    built.path = os.path.join(out_dir, f"{built.variant}_{built.max_seq_len}.pte")
    if built.variant in EXTERNAL_WEIGHTS:
        # model.ptd has a fixed name: one directory per program.
        directory = os.path.join(out_dir, f"{built.variant}_{built.max_seq_len}")
        os.makedirs(directory, exist_ok=True)
        built.path = os.path.join(directory, "program.pte")
        manager.write_tensor_data_to_file(directory)
    with open(built.path, "wb") as f:
        f.write(manager.buffer)
    built.copies = copy_accounting.account_copies(
        manager.executorch_program, "decode", list(cache_shapes.values())
    )
    built.cache_shapes = dict(cache_shapes)
    built.engine, built.decode_delegates = decode_engine(manager)


def build_programs(
    config: BenchConfig, max_seq_len: int, names: Sequence[str], out_dir: str, log=print
) -> dict[str, BuiltProgram]:
    """Exports the model at `max_seq_len` and builds every program variant in `names` into
    `out_dir`. A variant that fails to build gets `error` set (the others still build); the
    eager variant needs no program."""
    module, methods = workload.export_methods(config, max_seq_len)
    shapes = workload.cache_shapes(module)
    weights = sum(p.numel() * p.element_size() for p in module.parameters())
    built = {n: BuiltProgram(n, max_seq_len, weights_bytes=weights) for n in names}
    for name in (n for n in names if VARIANTS[n].kind == "eager"):
        built[name].engine, built[name].decode_delegates = EAGER_ENGINE, EAGER_DECODE
    plain = [n for n in names if VARIANTS[n].kind == "executorch"]
    for group in (
        [n for n in plain if n not in PLAIN_XNNPACK],
        [n for n in plain if n in PLAIN_XNNPACK],
    ):
        if not group:
            continue
        try:
            log(f"  lowering plain ExecuTorch ({', '.join(group)}) at {max_seq_len}")
            for name, manager in build_plain(copy.deepcopy(methods), group).items():
                _save(built[name], manager, out_dir, shapes)
        except Exception as exc:  # noqa: BLE001 - reported in the rows
            for name in group:
                built[name].error = f"export failed: {_short_error(exc)}"
    for name in (n for n in names if VARIANTS[n].kind == "delegate"):
        log(f"  lowering {name} at {max_seq_len}")
        try:
            _save(built[name], build_delegate(copy.deepcopy(methods), name), out_dir, shapes)
        except Exception as exc:  # noqa: BLE001 - reported in the rows
            built[name].error = f"export failed: {_short_error(exc)}"
    return built
