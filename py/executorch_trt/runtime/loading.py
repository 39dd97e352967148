"""``load``: a ``.pte`` (path, bytes or binary file object) and its ``.ptd`` into a ``Program``,
each argument checked before the delegate library is needed."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any, BinaryIO

from executorch_trt.runtime import library
from executorch_trt.runtime.program import Program


def _program_source(program: Any) -> Any:
    """Checks ``load``'s argument before anything is loaded: a path (``str``/``os.PathLike``)
    must name an existing file (``FileNotFoundError``/``IsADirectoryError`` naming it); bytes
    and binary file objects pass through; a file object opened in text mode and anything else
    are a ``TypeError``."""
    if isinstance(program, io.TextIOBase):
        raise TypeError(_TEXT_MODE.format(getattr(program, "name", type(program).__name__)))
    if isinstance(program, (bytes, bytearray, memoryview)) or hasattr(program, "read"):
        return program
    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if os.path.isdir(path):
            raise IsADirectoryError(
                errno.EISDIR,
                "executorch_trt.runtime.load: expected a .pte file, got a directory",
                path,
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(
                errno.ENOENT, "executorch_trt.runtime.load: no such .pte file", path
            )
        return path
    raise TypeError(
        "executorch_trt.runtime.load: expected a path (str or pathlib.Path), the bytes of a "
        f".pte or a binary file object, got {type(program).__name__}"
    )


def _data_source(data: Any) -> str:
    """``load``'s ``data`` as a path string: ``TypeError`` unless ``str``/``os.PathLike``,
    ``FileNotFoundError`` naming it unless it is an existing file."""
    if not isinstance(data, (str, os.PathLike)):
        raise TypeError(
            "executorch_trt.runtime.load: data must be the path of a .ptd file "
            f"(str or pathlib.Path), got {type(data).__name__}"
        )
    path = os.fsdecode(os.fspath(data))
    if not os.path.isfile(path):
        raise FileNotFoundError(
            errno.ENOENT, "executorch_trt.runtime.load: no such .ptd file", path
        )
    return path


_TEXT_MODE = (
    "executorch_trt.runtime.load: {} is a file object in text mode; a .pte is binary: "
    "open the file in binary mode (open(path, 'rb')) or pass its path"
)


def load(
    program: str | Path | bytes | bytearray | BinaryIO, data: str | Path | None = None
) -> Program:
    """Loads a ``.pte`` (path, bytes or binary file object) with the delegate library
    registered, and every method of it (state starts from each buffer's initial value).

    ``data``: the path of the program's external data file (``.ptd``), for a program exported
    with ``executorch_trt.export(..., external_weights=True)`` (its weights are there, written by
    ``ExecutorchProgramManager.write_tensor_data_to_file``). Without it such a program does not
    load (``RuntimeError``: the delegate names the missing key in the log).

    Raises ``FileNotFoundError`` (naming the path) when a path does not exist, ``TypeError`` for
    an argument that is neither a path nor bytes nor a binary file object (a file opened in text
    mode: open it with ``'rb'``; both checked before the library is needed),
    ``FileNotFoundError`` for a ``data`` path that does not exist, ``LibraryNotFoundError``
    when the library or the binding is missing, and ``RuntimeError``
    naming the program and the problem for a program that does not load (not an ExecuTorch
    program, a corrupted file, a delegate that rejects its blob), followed by the error lines
    ExecuTorch and the delegates logged while loading (also on stderr), which say why.
    """
    data_path = "" if data is None else _data_source(data)
    content = _program_source(program)
    binding = library.binding()
    if isinstance(content, str):
        return Program(binding.load_file(content, data_path))
    if hasattr(content, "read"):
        source = getattr(program, "name", type(program).__name__)
        content = content.read()
        if isinstance(content, str):
            raise TypeError(_TEXT_MODE.format(source))
        if not isinstance(content, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"executorch_trt.runtime.load: {source}.read() returned "
                f"{type(content).__name__}, not bytes: pass a binary file object"
            )
        what = f"the .pte read from {source}"
    else:
        what = f"the {len(content)} bytes of a .pte"
    return Program(binding.load_bytes(content, what, data_path))
