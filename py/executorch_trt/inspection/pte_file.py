"""Reading a ``.pte``: the bytes (or a path, or an ``ExecutorchProgramManager``) into ExecuTorch's
own schema objects (``executorch.exir.schema.Program``), with the checks its flatbuffer reader
does not make (identifier, truncation), each failure a ``ProgramReadError`` naming the source.

Schema and reader: ``executorch.exir.schema`` and ``executorch.exir._serialize`` (ExecuTorch
1.5.1); this package's runtime never imports them.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Any

from executorch.exir import schema

#: The flatbuffer file identifier of the programs ExecuTorch 1.5.1 writes and reads
#: (bytes 4..8 of a ``.pte``; ``schema/program.fbs`` ``file_identifier``).
PTE_IDENTIFIER = b"ET12"
_EXTENDED_HEADER_MAGIC = b"eh00"  # at byte 8 (executorch.exir._serialize._program)


class ProgramReadError(ValueError):
    """The input is not a readable ExecuTorch program (missing file, a directory, not a
    ``.pte``, truncated or corrupted). The message names the source and says what to do."""


@dataclasses.dataclass(frozen=True)
class ParsedProgram:
    """An emitted program and where it came from (``source``: a path, ``"<bytes>"`` or
    ``"<ExecutorchProgramManager>"``). Delegate data is inline
    (``program.backend_delegate_data``): ``deserialize_pte_binary`` moves segments back."""

    program: schema.Program
    source: str
    #: Size of the serialized program in bytes (None for an in-memory program).
    size: int | None = None


def read_program(program: Any) -> ParsedProgram:
    """Loads ``program``: an ``ExecutorchProgramManager`` (its ``executorch_program``), an
    ``executorch.exir.schema.Program``, the bytes of a ``.pte`` (``bytes``/``bytearray``/
    ``memoryview``) or a path to one (``str``/``os.PathLike``).

    Raises ``ProgramReadError`` (a ``ValueError``) naming the file and the problem for a missing
    or unreadable file, a directory, data that is not an ExecuTorch program, a program of
    another format version, or truncated/corrupted data; ``TypeError`` for any other type.
    """
    if isinstance(program, schema.Program):
        return ParsedProgram(program, "<Program>")
    emitted = getattr(program, "executorch_program", None)
    if isinstance(emitted, schema.Program):
        return ParsedProgram(emitted, "<ExecutorchProgramManager>")
    if isinstance(program, (bytes, bytearray, memoryview)):
        data = bytes(program)
        return ParsedProgram(parse_pte(data, "<bytes>"), "<bytes>", len(data))
    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        data = _read_file(path)
        return ParsedProgram(parse_pte(data, path), path, len(data))
    raise TypeError(
        f"expected an ExecutorchProgramManager, the bytes of a .pte or a path to one, got "
        f"{type(program).__name__}"
    )


def _read_file(path: str) -> bytes:
    if os.path.isdir(path):
        raise ProgramReadError(f"{path}: is a directory; pass the path of a .pte file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        where = "" if os.path.isabs(path) else f" (looked in {os.path.abspath(path)})"
        raise ProgramReadError(
            f"{path}: no such file{where}; pass the path of a .pte file"
        ) from None
    except OSError as exc:
        raise ProgramReadError(
            f"{path}: cannot read it ({exc.strerror or exc}); check the path and its permissions"
        ) from None


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
            "ExecutorchProgramManager.buffer or executorch_trt.export(...).buffer"
        )
    if data[4:8] != PTE_IDENTIFIER:
        raise ProgramReadError(
            f"{source}: ExecuTorch program format {data[4:8].decode('ascii', 'replace')!r}, "
            f"this reader (ExecuTorch 1.5.1) reads {PTE_IDENTIFIER.decode()}; re-export the "
            "program with the pinned ExecuTorch"
        )
    _check_extended_header(data, source)
    try:
        return deserialize_pte_binary(data).program
    except Exception as exc:  # noqa: BLE001 - the flatbuffer reader raises struct.error etc.
        raise ProgramReadError(
            f"{source}: cannot parse the program ({type(exc).__name__}: {exc}); the file is "
            "truncated or corrupted; export it again"
        ) from None


def _check_extended_header(data: bytes, source: str) -> None:
    if data[8:12] != _EXTENDED_HEADER_MAGIC:
        return
    if len(data) < 40:
        raise ProgramReadError(
            f"{source}: truncated: {len(data)} bytes end inside the 40-byte header; copy or "
            "export the file again"
        )
    length, program_size, segment_base = struct.unpack_from("<IQQ", data, 12)
    segment_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else 0
    needed = max(program_size, segment_base + segment_size if segment_base else 0)
    if needed > len(data):
        raise ProgramReadError(
            f"{source}: truncated: its header says the program needs {needed} bytes, the data "
            f"has {len(data)}; copy or export the file again"
        )
