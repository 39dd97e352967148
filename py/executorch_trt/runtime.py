"""Loading and running ``.pte`` programs that use the TensorRT delegate, from Python.

Wraps the stock ``executorch.runtime``. The delegate library (``libexecutorch_trt.so``, built
from ``//core``) registers the ``"TensorRTBackend"`` backend and the
``executorch_trt::kv_cache_update.out`` kernel in the ``libexecutorch.so`` that the Python
runtime links; ``load`` opens it first with ``ctypes.CDLL(path, RTLD_GLOBAL)``.

Notes (ExecuTorch 1.5.1, verified):

* ``Program.load_method`` shares one set of memory arenas across the host methods of a
  program, so programs whose methods share state must be exported with
  ``share_mutable_buffers=True`` (``executorch_trt.export``'s default).
* Loading a method copies the exported initial value of every initialised mutable buffer into
  the (shared) arena, i.e. loading ``read_state`` after ``decode`` ran resets the cache.
  ``load`` therefore loads every method up front: state starts from its initial value once,
  at ``load``, and persists from then on. A new ``load`` is a new, isolated session.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from pathlib import Path
from typing import Any, BinaryIO, List, Optional, Sequence, Set, Union

import torch

from executorch_trt.wire import BACKEND_ID

LIBRARY_ENV = "EXECUTORCH_TRT_LIBRARY"
RUNFILES_PATH = "executorch_trt/core/libexecutorch_trt.so"

_lock = threading.Lock()
_loaded_library: Optional[ctypes.CDLL] = None


class LibraryNotFoundError(RuntimeError):
    """The delegate library could not be located (see ``library_path``)."""


def _runfiles_library() -> Optional[str]:
    try:
        from runfiles import Runfiles  # PyPI: bazel-runfiles
    except ImportError:
        return None
    r = Runfiles.Create()
    path = r.Rlocation(RUNFILES_PATH) if r is not None else None
    return path if path and os.path.isfile(path) else None


def library_path() -> str:
    """Where ``libexecutorch_trt.so`` is.

    Order: ``$EXECUTORCH_TRT_LIBRARY`` (must name an existing file), then Bazel runfiles
    (``executorch_trt/core/libexecutorch_trt.so``). Raises ``LibraryNotFoundError`` saying how
    to build it otherwise.
    """
    env = os.environ.get(LIBRARY_ENV)
    if env:
        if not os.path.isfile(env):
            raise LibraryNotFoundError(f"${LIBRARY_ENV}={env!r} does not name a file")
        return env
    path = _runfiles_library()
    if path:
        return path
    raise LibraryNotFoundError(
        "libexecutorch_trt.so not found: build the delegate library with Bazel "
        "(`./bazelw build //core/...`) and set "
        f"{LIBRARY_ENV}=/path/to/bazel-bin/core/libexecutorch_trt.so, or run under "
        "`bazel run`/`bazel test` with the library in the target's data"
    )


def library_unavailable_reason() -> Optional[str]:
    """``None`` when ``library_path()`` finds the delegate library, else why not (for a test's
    skip or failure reason: tests that need the library never pass vacuously)."""
    try:
        library_path()
        return None
    except LibraryNotFoundError as e:
        return str(e)


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """Opens the delegate library once per process (``RTLD_GLOBAL``) after the Python runtime,
    and checks that ``"TensorRTBackend"`` is then registered. Raises ``LibraryNotFoundError`` or
    ``RuntimeError``."""
    global _loaded_library
    with _lock:
        if _loaded_library is not None:
            return _loaded_library
        from executorch.runtime import Runtime

        runtime = Runtime.get()  # loads libexecutorch.so first, so the library registers there
        lib = ctypes.CDLL(path or library_path(), mode=ctypes.RTLD_GLOBAL)
        if not runtime.backend_registry.is_available(BACKEND_ID):
            raise RuntimeError(
                f"{BACKEND_ID} is not registered after loading {lib._name}; the library must "
                "link the same libexecutorch.so as the Python runtime"
            )
        _loaded_library = lib
        return lib


def bytes_copied() -> int:
    """Bytes the delegate has copied in this process (cumulative, all loaded programs): the
    reflect copies it makes when ExecuTorch hands it an aliased output that is a separate
    tensor (copy-back / stock finalisation). 0 across decode steps means the in-place
    contract held (DESIGN.md "In place"). Reads ``executorch_trt_bytes_copied()``."""
    fn = load_library().executorch_trt_bytes_copied
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())


def cross_attn_cache_updates() -> int:
    """How many times ``executorch::update_cross_attn_cache.out`` has written a cache in this
    process (cumulative, all loaded programs, plain or delegated): one per run of a
    ``torch.cond`` recompute branch. A decode step that reuses its cross-attention caches adds
    0. Reads ``executorch_trt_cross_attn_cache_updates()`` (``core/kernels/cross_attn_cache.h``).
    """
    fn = load_library().executorch_trt_cross_attn_cache_updates
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())


class Method:
    """A loaded method. ``execute(inputs)`` takes tensors in the method's input order and
    returns its user outputs as a list of tensors (copies; mutable buffers persist inside the
    loaded program across calls). It keeps its ``Program`` alive: the stock method does not,
    so ``load(pte).load_method(name)`` would otherwise run on a freed program."""

    def __init__(self, method: Any, name: str, program: Any = None) -> None:
        self._method = method
        self.name = name
        self._program = program  # owns the ExecuTorch program the method runs in

    def execute(self, inputs: Sequence[Any]) -> List[Any]:
        """Runs the method on ``inputs`` (in the method's input order) and returns its user
        outputs.

        Tensor inputs are passed in contiguous layout (the default dim order): a tensor that
        is not contiguous (``channels_last``, a transpose, an ``expand``, a slice with a step)
        is passed as ``t.contiguous()``, a copy, so its values are what the method sees. The
        stock pybinding would take a ``channels_last`` tensor's memory as if it were in the
        default order (wrong numbers, silently) and rejects other strided tensors. A
        contiguous tensor is passed as it is (no copy). Other inputs (ints, floats, bools)
        pass through unchanged.
        """
        return list(self._method.execute([
            x.contiguous() if isinstance(x, torch.Tensor) and not x.is_contiguous() else x
            for x in inputs]))

    @property
    def metadata(self) -> Any:
        return self._method.metadata


class Program:
    """A loaded program; each ``load`` call is an independent instance (own mutable state).
    Every method is loaded at construction (see the module notes)."""

    def __init__(self, program: Any) -> None:
        self._program = program
        for name in sorted(program.method_names):
            program.load_method(name)

    @property
    def method_names(self) -> Set[str]:
        return set(self._program.method_names)

    def load_method(self, name: str) -> Method:
        """Loads (or returns the already loaded) method ``name``; ``KeyError`` if unknown."""
        if name not in self._program.method_names:
            raise KeyError(f"program has no method {name!r} (has {sorted(self.method_names)})")
        return Method(self._program.load_method(name), name, self)


def _program_source(program: Any) -> Any:
    """Checks ``load``'s argument before anything is loaded: a path (``str``/``os.PathLike``)
    must name an existing file (``FileNotFoundError``/``IsADirectoryError`` naming it); bytes
    and binary file objects pass through; anything else is a ``TypeError``."""
    if isinstance(program, (bytes, bytearray)) or hasattr(program, "read"):
        return program
    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if os.path.isdir(path):
            raise IsADirectoryError(
                errno.EISDIR, "executorch_trt.runtime.load: expected a .pte file, got a directory",
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


def load(program: Union[str, Path, bytes, bytearray, BinaryIO]) -> Program:
    """Loads a ``.pte`` (path, bytes or binary file object) with the delegate library
    registered.

    Raises ``FileNotFoundError`` (naming the path) when a path does not exist, ``TypeError``
    for an argument that is neither a path nor bytes (both checked before the library is
    needed), ``LibraryNotFoundError`` when the library is missing, and whatever
    ``executorch.runtime`` raises for a bad program (the delegate's init errors surface here or
    at ``load_method``).
    """
    data = _program_source(program)
    load_library()
    from executorch.runtime import Runtime

    return Program(Runtime.get().load_program(data))
