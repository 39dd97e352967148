"""Reading an emitted ExecuTorch program: loading a ``.pte``, its tensors, and the bytes each
copy instruction of an execution plan writes.

ExecuTorch keeps a mutated buffer correct with an explicit write-back: an ``aten::copy_``
(inserted by ``insert_write_back_for_buffers_pass``) of the updated value into the buffer, on
every call. Such copies are ``KernelCall`` instructions of the method's execution plan and their
tensors' sizes are static, so the bytes a call copies are exact without running anything.

Used by ``executorch_trt.inspect`` (``program_report.py``) and the decode benchmark
(``benchmarks/copy_accounting.py``). Schema: ``executorch.exir.schema`` (ExecuTorch 1.5.1).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import struct
from typing import Iterator, List, Optional, Tuple

import torch
from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType
from executorch.exir.tensor import get_scalar_type

#: Kernels whose only job is to copy a source tensor into a destination tensor.
#: ``aten::copy_`` is ExecuTorch's write-back (args ``[self, src, non_blocking, self]``),
#: ``aten::copy`` its out variant (``[self, src, non_blocking, out, out]``),
#: ``executorch_prim::et_copy_index`` the copy of one ``torch.map`` iteration's output into a
#: slice of the accumulator (args ``[accumulator, item, index]``, emitter ``_emit_map``).
COPY_KERNELS = frozenset({
    "aten::copy_",
    "aten::copy",
    "executorch_prim::et_copy_index",
})

#: Out-of-place updates that write a complete new tensor the size of their ``self`` input
#: (``args[0]``) into their output (``args[-1]``): a full copy of ``self`` inside the kernel.
FUNCTIONAL_UPDATE_KERNELS = frozenset({
    "aten::index_put",
    "aten::index_copy",
    "aten::slice_scatter",
    "aten::select_scatter",
})

#: The flatbuffer file identifier of the programs ExecuTorch 1.5.1 writes and reads
#: (bytes 4..8 of a ``.pte``; ``schema/program.fbs`` ``file_identifier``).
PTE_IDENTIFIER = b"ET12"
_EXTENDED_HEADER_MAGIC = b"eh00"  # at byte 8 (executorch.exir._serialize._program)


class ProgramReadError(ValueError):
    """The input is not a readable ExecuTorch program (missing file, a directory, not a
    ``.pte``, truncated or corrupted). The message names the source and says what to do."""


@dataclasses.dataclass(frozen=True)
class LoadedProgram:
    """An emitted program and where it came from (``source``: a path, ``"<bytes>"`` or
    ``"<ExecutorchProgramManager>"``). Delegate data is inline
    (``program.backend_delegate_data``): ``deserialize_pte_binary`` moves segments back."""

    program: schema.Program
    source: str
    #: Size of the serialized program in bytes (None for an in-memory program).
    size: Optional[int] = None


def load_program(program) -> LoadedProgram:
    """Loads ``program``: an ``ExecutorchProgramManager`` (its ``executorch_program``), an
    ``executorch.exir.schema.Program``, the bytes of a ``.pte`` (``bytes``/``bytearray``/
    ``memoryview``) or a path to one (``str``/``os.PathLike``).

    Raises ``ProgramReadError`` (a ``ValueError``) naming the file and the problem for a missing
    or unreadable file, a directory, data that is not an ExecuTorch program, a program of
    another format version, or truncated/corrupted data; ``TypeError`` for any other type.
    """
    if isinstance(program, schema.Program):
        return LoadedProgram(program, "<Program>")
    emitted = getattr(program, "executorch_program", None)
    if isinstance(emitted, schema.Program):
        return LoadedProgram(emitted, "<ExecutorchProgramManager>")
    if isinstance(program, (bytes, bytearray, memoryview)):
        data = bytes(program)
        return LoadedProgram(parse_pte(data, "<bytes>"), "<bytes>", len(data))
    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        data = _read_file(path)
        return LoadedProgram(parse_pte(data, path), path, len(data))
    raise TypeError(
        f"expected an ExecutorchProgramManager, the bytes of a .pte or a path to one, got "
        f"{type(program).__name__}")


def _read_file(path: str) -> bytes:
    if os.path.isdir(path):
        raise ProgramReadError(f"{path}: is a directory; pass the path of a .pte file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        where = "" if os.path.isabs(path) else f" (looked in {os.path.abspath(path)})"
        raise ProgramReadError(
            f"{path}: no such file{where}; pass the path of a .pte file") from None
    except OSError as exc:
        raise ProgramReadError(
            f"{path}: cannot read it ({exc.strerror or exc}); check the path and its "
            "permissions") from None


def parse_pte(data: bytes, source: str = "<bytes>") -> schema.Program:
    """Parses the bytes of a ``.pte`` (``deserialize_pte_binary``) after checking what the
    parser does not: the ``ET12`` identifier and that the sizes in the extended header fit in
    ``data`` (a truncated file otherwise fails deep inside the flatbuffer reader).
    Raises ``ProgramReadError`` naming ``source``."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    if len(data) < 8 or data[4:6] != PTE_IDENTIFIER[:2]:
        found = repr(data[4:8]) if len(data) >= 8 else f"only {len(data)} bytes"
        raise ProgramReadError(
            f"{source}: not an ExecuTorch program (expected the identifier "
            f"{PTE_IDENTIFIER.decode()} at byte 4, found {found}); pass a .pte written by "
            "ExecutorchProgramManager.buffer or executorch_trt.export(...).buffer")
    if data[4:8] != PTE_IDENTIFIER:
        raise ProgramReadError(
            f"{source}: ExecuTorch program format {data[4:8].decode('ascii', 'replace')!r}, "
            f"this reader (ExecuTorch 1.5.1) reads {PTE_IDENTIFIER.decode()}; re-export the "
            "program with the pinned ExecuTorch")
    _check_extended_header(data, source)
    try:
        return deserialize_pte_binary(data).program
    except Exception as exc:  # noqa: BLE001 - the flatbuffer reader raises struct.error etc.
        raise ProgramReadError(
            f"{source}: cannot parse the program ({type(exc).__name__}: {exc}); the file is "
            "truncated or corrupted; export it again") from None


def _check_extended_header(data: bytes, source: str) -> None:
    if data[8:12] != _EXTENDED_HEADER_MAGIC:
        return
    if len(data) < 40:
        raise ProgramReadError(
            f"{source}: truncated: {len(data)} bytes end inside the 40-byte header; copy or "
            "export the file again")
    length, program_size, segment_base = struct.unpack_from("<IQQ", data, 12)
    segment_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else 0
    needed = max(program_size, segment_base + segment_size if segment_base else 0)
    if needed > len(data):
        raise ProgramReadError(
            f"{source}: truncated: its header says the program needs {needed} bytes, the data "
            f"has {len(data)}; copy or export the file again")


def find_plan(program: schema.Program, method: str) -> schema.ExecutionPlan:
    """The execution plan named ``method``; ``KeyError`` naming the methods it has otherwise."""
    for plan in program.execution_plan:
        if plan.name == method:
            return plan
    names = [p.name for p in program.execution_plan]
    raise KeyError(f"program has no method {method!r} (it has {names})")


def tensor_at(plan: schema.ExecutionPlan, value_index: int) -> Optional[schema.Tensor]:
    """The tensor at ``plan.values[value_index]``, or None if that value is not a tensor."""
    if not 0 <= value_index < len(plan.values):
        return None
    value = plan.values[value_index].val
    return value if isinstance(value, schema.Tensor) else None


def tensor_dtype(tensor: schema.Tensor) -> torch.dtype:
    """The ``torch.dtype`` of an emitted tensor; ``ValueError`` for an unknown scalar type."""
    try:
        return get_scalar_type(ScalarType(int(tensor.scalar_type)))
    except (KeyError, ValueError):
        raise ValueError(f"unknown ExecuTorch scalar type {tensor.scalar_type!r}") from None


def dtype_name(tensor: schema.Tensor) -> str:
    """``"float32"``, ``"int64"``, ... (torch's name without ``torch.``)."""
    return str(tensor_dtype(tensor)).replace("torch.", "")


def tensor_nbytes(tensor: schema.Tensor) -> int:
    """Bytes of an emitted tensor: static sizes x element size. ``ValueError`` for an unknown
    scalar type."""
    n = tensor_dtype(tensor).itemsize
    for size in tensor.sizes:
        n *= int(size)
    return n


def tensor_fqn(tensor: schema.Tensor) -> Optional[str]:
    """The mutable buffer's fully qualified name the program records for ``tensor``, or None.

    The emitter records it only for mutable buffers and only when exported with
    ``emit_mutable_buffer_names=True`` (``_emitter.placeholder``); an external constant also
    carries a name but with ``location == EXTERNAL`` and is not returned."""
    info = getattr(tensor, "extra_tensor_info", None)
    if info is None or not info.fully_qualified_name:
        return None
    if int(info.location) != int(schema.TensorDataLocation.SEGMENT):
        return None
    return info.fully_qualified_name


def operator_name(plan: schema.ExecutionPlan, op_index: int) -> str:
    """``"aten::mul.out"``: the operator's name and overload (no overload: just the name)."""
    op = plan.operators[op_index]
    return f"{op.name}.{op.overload}" if op.overload else op.name


def instructions(plan: schema.ExecutionPlan) -> Iterator[Tuple[int, object]]:
    """(position, instruction arguments) of every instruction of every chain, in order;
    positions count across chains."""
    position = 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            yield position, instruction.instr_args
            position += 1


def kernel_calls(plan: schema.ExecutionPlan) -> Iterator[Tuple[int, str, List[int]]]:
    """(position, operator name without overload, args) of every ``KernelCall``, in order."""
    for position, call in instructions(plan):
        if isinstance(call, schema.KernelCall):
            yield position, plan.operators[call.op_index].name, list(call.args)


@dataclasses.dataclass(frozen=True)
class Copy:
    """One instruction that writes ``nbytes`` bytes of ``source`` into ``destination``
    (value ids of the plan) on each execution. ``op`` is the operator name (no overload)."""

    position: int
    op: str
    source: int
    destination: int
    nbytes: int


def copies(plan: schema.ExecutionPlan) -> List[Copy]:
    """Every copy kernel (``COPY_KERNELS``) of ``plan`` whose destination is a tensor.

    ``aten::copy_``/``aten::copy``: destination = the last argument (the emitter appends the
    return value: ``self`` for ``copy_``, ``out`` for ``copy.out``), bytes = the destination's
    size. ``et_copy_index``: destination = ``args[0]``, bytes = the copied item's size (per
    execution of the instruction; inside a ``torch.map`` loop it runs once per iteration)."""
    found = []
    for position, op, args in kernel_calls(plan):
        if op not in COPY_KERNELS or len(args) < 2:
            continue
        if op == "executorch_prim::et_copy_index":
            destination, source, sized = args[0], args[1], args[1]
        else:
            destination, source, sized = args[-1], args[1], args[-1]
        dest_tensor, sized_tensor = tensor_at(plan, destination), tensor_at(plan, sized)
        if dest_tensor is None or sized_tensor is None:
            continue
        found.append(Copy(position, op, source, destination, tensor_nbytes(sized_tensor)))
    return found


def functional_updates(plan: schema.ExecutionPlan) -> List[Copy]:
    """Every out-of-place update kernel (``FUNCTIONAL_UPDATE_KERNELS``) that writes a new
    tensor (``args[-1]``, a different value from ``args[0]``) holding all of ``args[0]``
    updated: ``source`` = ``args[0]``, ``nbytes`` = the output's size."""
    found = []
    for position, op, args in kernel_calls(plan):
        if op not in FUNCTIONAL_UPDATE_KERNELS or len(args) < 2 or args[0] == args[-1]:
            continue
        src, dest = tensor_at(plan, args[0]), tensor_at(plan, args[-1])
        if src is not None and dest is not None:
            found.append(Copy(position, op, args[0], args[-1], tensor_nbytes(dest)))
    return found


def describe_value(plan: schema.ExecutionPlan, value_index: int) -> str:
    """A stable description of a tensor value: ``"value 12 [1, 2, 8, 4] float32"``."""
    tensor = tensor_at(plan, value_index)
    if tensor is None:
        return f"value {value_index}"
    return f"value {value_index} {list(int(s) for s in tensor.sizes)} {dtype_name(tensor)}"


def sizes(tensor: schema.Tensor) -> Tuple[int, ...]:
    """The tensor's static sizes as a tuple of ints."""
    return tuple(int(s) for s in tensor.sizes)



@functools.lru_cache(maxsize=None)
def _schema(name: str, overload: str):
    try:
        return torch._C._get_schema(name, overload)
    except RuntimeError:  # not registered in this process (e.g. a custom op library not loaded)
        return None


def kernel_effects(plan: schema.ExecutionPlan, call: schema.KernelCall
                   ) -> Tuple[List[int], List[int]]:
    """(values read, values written) by one ``KernelCall``, from the operator's schema.

    The emitter passes a kernel its schema arguments in order, then its return values
    (``[self, other, out, out]`` for ``aten::mul.out``). An ``out`` argument and every return
    is written; a mutable argument that is not ``out`` (``self`` of ``index_put_``/``copy_``)
    is read and written; every other argument is read. Values inside lists are not included.
    For an operator not registered in this process (or whose argument count does not match its
    schema) the last argument is taken as written and the others as read."""
    op = plan.operators[call.op_index]
    args = list(call.args)
    fn_schema = _schema(op.name, op.overload or "")
    if fn_schema is None or len(args) != len(fn_schema.arguments) + len(fn_schema.returns):
        return args[:-1], args[-1:]
    reads, writes = [], []
    for value, argument in zip(args, fn_schema.arguments):
        if argument.is_out:
            writes.append(value)
        elif argument.alias_info is not None and argument.alias_info.is_write:
            reads.append(value)
            writes.append(value)
        else:
            reads.append(value)
    writes.extend(args[len(fn_schema.arguments):])
    return reads, writes
