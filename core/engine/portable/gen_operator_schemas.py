"""Generates the portable engine's operator schema table (operator_schemas.txt, checked in).

The table is checked in so that C++-only builds never need the Python environment: the build
turns it into C++ (operator_schemas_to_cc.awk) with nothing but awk.
//core/engine/portable:operator_schemas_table_test regenerates it under the pinned environment
and fails when the checked-in copy differs (after a torch/ExecuTorch pin change or a new own
kernel), printing the command that updates it.

The format: comment lines start with "#"; every other line is one operator, sorted by name
(strcmp order), then each value a call passes, in order, as ``name:Type|Type`` (the flatbuffer
``KernelTypes`` the value may have, in the union's order), separated by single spaces::

    aten::add.out self:Tensor other:Tensor alpha:Int|Bool|Double out:Tensor return:Tensor

ExecuTorch 1.5.1's boxed kernels read their arguments with ``EValue::toTensor()``,
``toBool()``, ``toIntList()``, ... whose ``ET_CHECK`` aborts the process when the value has
another type, and a nested program records no operator schemas: a ``KernelCall`` whose
argument index points at a value of another type (or with too few arguments) passes
``Program::load`` and ``Method::load`` and aborts at ``execute``. ``CheckNestedProgram``
compares every kernel call against this table before the method is loaded.

The operators: every kernel the pinned ExecuTorch wheel's Python runtime registers
(``portable_lib._get_operator_names()``: the portable and optimized ATen kernels,
``executorch_prim::*``, ``dim_order_ops::*``, ...) and the delegate's own kernels
(``core/kernels``: ``executorch_trt::kv_cache_update.out``, ``executorch_trt::gqa_attention.out``,
``executorch::alias.out``, ``executorch::update_cross_attn_cache.out``), each with the schema
torch knows for it (``torch._C._jit_get_schemas_for_operator``, after importing the modules
that define the non-ATen namespaces). //tests/cpp:nested_program_checks_test checks that every
kernel registered in a C++ binary has an entry.

What ExecuTorch's emitter writes for one kernel call (exir/emit/_emitter.py ``_emit_operator``),
verified on the exporter's programs by that test: one value per schema argument, in schema
order (keyword-only and out arguments included, defaults emitted as values), then the return
values (``return_tags``). The boxed kernels index that list without checking its length.

Argument type -> accepted flatbuffer ``KernelTypes`` of the value (schema.fbs):
  Tensor -> Tensor; Scalar -> Int | Double | Bool; int, SymInt, ScalarType, Layout,
  MemoryFormat -> Int; float -> Double; bool -> Bool; str -> String; int[] / SymInt[] ->
  IntList; float[] -> DoubleList; bool[] -> BoolList; Tensor[] -> TensorList; Tensor?[] ->
  OptionalTensorList; Device -> Int | String; X? -> X | Null.
An operator with an argument of any other type is left out (and listed in the output's
comment); CheckNestedProgram then rejects a program that calls it.

Usage: gen_operator_schemas.py --out PATH OPS_PY ATTENTION_OPS_PY CROSS_ATTN_OPS_PY
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

import torch

# The flatbuffer union's member indices (executorch/schema/program.fbs, union KernelTypes;
# NONE = 0). operator_schemas.h names the same bits; nested_program_checks.cpp asserts them
# against the generated flatbuffer code.
KERNEL_TYPES = {
    "Null": 1,
    "Int": 2,
    "Bool": 3,
    "Double": 4,
    "Tensor": 5,
    "String": 6,
    "IntList": 7,
    "DoubleList": 8,
    "BoolList": 9,
    "TensorList": 10,
    "OptionalTensorList": 11,
}

#: The delegate's own kernels (core/kernels/BUILD), registered by the C++ libraries only.
OWN_KERNELS = (
    "executorch_trt::kv_cache_update.out",
    "executorch_trt::gqa_attention.out",
    "executorch::alias.out",
    "executorch::update_cross_attn_cache.out",
)


def _mask(*names: str) -> int:
    m = 0
    for n in names:
        m |= 1 << KERNEL_TYPES[n]
    return m


def tags_of(t: torch._C.JitType) -> int | None:
    """The KernelTypes bitmask a value of schema type ``t`` may have, or None if unsupported."""
    kind = t.kind()
    if kind == "OptionalType":
        inner = tags_of(t.getElementType())
        return None if inner is None else inner | _mask("Null")
    if kind == "ListType":
        elem = t.getElementType()
        ek = elem.kind()
        if ek in ("IntType", "SymIntType"):
            return _mask("IntList")
        if ek == "FloatType":
            return _mask("DoubleList")
        if ek == "BoolType":
            return _mask("BoolList")
        if ek == "TensorType":
            return _mask("TensorList")
        if ek == "OptionalType" and elem.getElementType().kind() == "TensorType":
            return _mask("OptionalTensorList")
        return None
    simple = {
        "TensorType": ("Tensor",),
        "NumberType": ("Int", "Double", "Bool"),
        "IntType": ("Int",),
        "SymIntType": ("Int",),
        "FloatType": ("Double",),
        "BoolType": ("Bool",),
        "StringType": ("String",),
        "DeviceObjType": ("Int", "String"),
    }.get(kind)
    return None if simple is None else _mask(*simple)


def _import_namespaces(op_modules: Sequence[str]) -> None:
    """Defines the non-ATen operators' schemas in torch (each import registers a library).

    ``op_modules``: the files of py/executorch_trt that define the delegate's own operators
    (py/executorch_trt/ops/*.py), loaded on their own: they import only torch
    and executorch, and importing the package would make this build step depend on the runtime
    library it is part of."""
    import importlib.util

    # Imported for what they register: the dim_order_ops and executorch_prim namespaces.
    import executorch.exir.passes.dim_order_ops_registry
    import executorch.exir.passes.executorch_prim_ops_registry  # noqa: F401

    for i, path in enumerate(op_modules):
        spec = importlib.util.spec_from_file_location(f"_executorch_trt_op_module_{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    for optional in (
        "executorch.exir.passes._quant_patterns_and_replacements",
        "executorch.kernels.quantized",
        "executorch.extension.llm.custom_ops.custom_ops",
    ):
        # Namespaces of kernels the runtime may register; an absent one leaves its ops out
        # (they are then reported as missing).
        with contextlib.suppress(Exception):
            __import__(optional)


def registered_kernels() -> list[str]:
    """Every kernel name the wheel's runtime registers, plus the delegate's own."""
    from executorch.extension.pybindings import portable_lib

    return sorted(set(portable_lib._get_operator_names()) | set(OWN_KERNELS))


def schema_for(kernel: str) -> torch._C.FunctionSchema | None:
    """The schema of ``ns::name.overload`` (``.default`` or no overload = the unnamed one)."""
    base, _, overload = kernel.partition(".")
    if overload == "default":
        overload = ""
    for s in torch._C._jit_get_schemas_for_operator(base):
        if s.overload_name == overload:
            return s
    return None


#: Kernels ExecuTorch's emitter calls with arguments it lays out itself (exir/emit/_emitter.py):
#: no schema in torch. (name, [(argument, KernelTypes names)...]).
EMITTER_KERNELS = (
    # _emit_view: [self, size, out].
    (
        "executorch_prim::et_view.default",
        [("self", ("Tensor",)), ("size", ("IntList",)), ("out", ("Tensor",))],
    ),
    # torch.map / scan: [accumulated output, this iteration's output, iteration index].
    (
        "executorch_prim::et_copy_index.tensor",
        [("copy_to", ("Tensor",)), ("copy_from", ("Tensor",)), ("index", ("Int",))],
    ),
)

_SCALAR_RETURN = ("IntType", "SymIntType", "FloatType", "BoolType", "NumberType")


def return_tags(s: torch._C.FunctionSchema) -> list[tuple[str, int]] | None:
    """The values the emitter appends after the arguments (``_emit_operator``), or None if a
    return type is not supported.

    An out variant (an argument with ``is_out``) gets one value: its out tensor when it has a
    single ``Tensor`` out argument, else a new ``TensorList`` of its out tensors (several outs,
    or a ``Tensor[]`` out). A symbolic op's scalar return is a placeholder the kernel
    overwrites (``Int``, ``Double`` or ``Bool``). Any other op gets a value per returned tensor
    (a ``TensorList`` for a returned ``Tensor[]``)."""
    outs = [a for a in s.arguments if a.is_out]
    if outs:
        single = len(outs) == 1 and outs[0].type.kind() == "TensorType"
        return [("return", _mask("Tensor") if single else _mask("TensorList"))]
    tags = []
    for i, r in enumerate(s.returns):
        name = "return" if len(s.returns) == 1 else f"return{i}"
        kind = r.type.kind()
        if kind == "TensorType":
            tags.append((name, _mask("Tensor")))
        elif kind == "ListType" and r.type.getElementType().kind() == "TensorType":
            tags.append((name, _mask("TensorList")))
        elif kind in _SCALAR_RETURN:
            tags.append((name, _mask("Int", "Double", "Bool")))
        else:
            return None
    return tags


def build_table(
    kernels: Sequence[str],
) -> tuple[list[tuple[str, list[tuple[str, int]]]], dict[str, str]]:
    """(kernel, [(argument name, mask)...]) for each kernel with a supported schema, and why
    each other kernel was left out."""
    table, left_out = [], {}
    by_hand = {k: [(n, _mask(*t)) for n, t in args] for k, args in EMITTER_KERNELS}
    for k in kernels:
        if k in by_hand:
            table.append((k, by_hand[k]))
            continue
        s = schema_for(k)
        if s is None:
            left_out[k] = "no schema in torch"
            continue
        args = []
        for a in s.arguments:
            m = tags_of(a.type)
            if m is None:
                left_out[k] = f"argument '{a.name}' of type {a.type}"
                break
            args.append((a.name, m))
        else:
            rets = return_tags(s)
            if rets is None:
                left_out[k] = f"a return of type {[str(r.type) for r in s.returns]}"
            else:
                table.append((k, args + rets))
    return table, left_out


def emit(table, left_out) -> str:
    """The table as operator_schemas.txt's lines (module docstring)."""
    names = sorted(KERNEL_TYPES, key=KERNEL_TYPES.get)

    def types(mask: int) -> str:
        return "|".join(n for n in names if mask & (1 << KERNEL_TYPES[n]))

    lines = [
        "# Generated by core/engine/portable/gen_operator_schemas.py; do not edit. Regenerate with",
        "# //core/engine/portable:operator_schemas_table_test's command (it fails when this is",
        "# stale). One operator per line: its name, then each value a call passes as name:types.",
        "# Operators left out (CheckNestedProgram rejects a call to them):",
    ]
    lines += [f"#   {k}: {why}" for k, why in sorted(left_out.items())] or ["#   (none)"]
    for kernel, args in table:
        lines.append(" ".join([kernel] + [f"{name}:{types(m)}" for name, m in args]))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("op_modules", nargs="*", help="files defining the delegate's own ops")
    args = parser.parse_args(argv)
    _import_namespaces(args.op_modules)
    kernels = registered_kernels()
    table, left_out = build_table(kernels)
    # Sorted by name (strcmp order): the C++ side binary-searches it.
    table.sort(key=lambda e: e[0].encode())
    own = [k for k in OWN_KERNELS if k not in dict(table)]
    if own:
        sys.exit(f"gen_operator_schemas: no schema for the delegate's own kernels {own}")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(emit(table, left_out))
    print(
        f"gen_operator_schemas: {len(table)} operators, {len(left_out)} left out", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
