"""Where the delegate library and the runtime binding are, and loading them once per process.

``libexecutorch_trt.so`` (built from ``//core``) registers the ``"TensorRTBackend"`` backend and
its kernels; ``_runtime_binding.so`` (``//py/binding``) is this package's binding over
ExecuTorch's C++ runtime. Both link the wheel's ``libexecutorch.so`` by soname, so opening the
delegate library with ``RTLD_GLOBAL`` registers it in the one registry every ExecuTorch runtime
of the process uses. Nothing here imports ``executorch.exir``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from typing import Any

from executorch_trt.format.wire import BACKEND_ID

LIBRARY_ENV = "EXECUTORCH_TRT_LIBRARY"
RUNFILES_PATH = "executorch_trt/core/libexecutorch_trt.so"
BINDING_ENV = "EXECUTORCH_TRT_BINDING"
BINDING_RUNFILES_PATH = "executorch_trt/py/binding/_runtime_binding.so"
# Where the binding is built relative to the delegate library (bazel-bin/ and runfiles alike).
_BINDING_FROM_LIBRARY = os.path.join("..", "py", "binding", "_runtime_binding.so")
# The installed wheel's location of both libraries: the package's root directory.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_lock = threading.Lock()
_loaded_library: ctypes.CDLL | None = None
_binding: Any = None


class LibraryNotFoundError(RuntimeError):
    """The delegate library or the runtime binding could not be located (see ``library_path``,
    ``binding_path``)."""


def runfiles_location(path: str) -> str | None:
    """The Bazel runfiles location of ``path`` (``workspace/relative/path``) when it is an
    existing file, else ``None`` (outside Bazel, or without the ``bazel-runfiles`` package)."""
    try:
        from runfiles import Runfiles  # PyPI: bazel-runfiles
    except ImportError:
        return None
    r = Runfiles.Create()
    found = r.Rlocation(path) if r is not None else None
    return found if found and os.path.isfile(found) else None


def _from_env_package_or_runfiles(env_name: str, runfiles_path: str) -> str | None:
    """``$env_name`` when set (it must name an existing file: ``LibraryNotFoundError``
    otherwise), else the file of that name in this package's directory (where the wheel
    installs it), else the Bazel runfiles location ``runfiles_path``, else ``None``."""
    env = os.environ.get(env_name)
    if env:
        if not os.path.isfile(env):
            raise LibraryNotFoundError(f"${env_name}={env!r} does not name a file")
        return env
    in_package = os.path.join(_PACKAGE_DIR, os.path.basename(runfiles_path))
    if os.path.isfile(in_package):
        return in_package
    return runfiles_location(runfiles_path)


def library_path() -> str:
    """Where ``libexecutorch_trt.so`` is.

    Order: ``$EXECUTORCH_TRT_LIBRARY`` (must name an existing file), then this package's
    directory (the installed wheel), then Bazel runfiles
    (``executorch_trt/core/libexecutorch_trt.so``). Raises ``LibraryNotFoundError`` saying how
    to build it otherwise.
    """
    path = _from_env_package_or_runfiles(LIBRARY_ENV, RUNFILES_PATH)
    if path:
        return path
    raise LibraryNotFoundError(
        f"libexecutorch_trt.so not found (not in {_PACKAGE_DIR}): install the wheel "
        "(`./bazelw build //:wheel`, then `pip install bazel-bin/executorch_trt-*.whl`), or "
        "build the delegate library with Bazel "
        "(`./bazelw build //core/...`) and set "
        f"{LIBRARY_ENV}=/path/to/bazel-bin/core/libexecutorch_trt.so, or run under "
        "`bazel run`/`bazel test` with the library in the target's data"
    )


def binding_path() -> str:
    """Where the runtime binding ``_runtime_binding.so`` (``//py/binding``) is.

    Order: ``$EXECUTORCH_TRT_BINDING`` (must name an existing file), then this package's
    directory (the installed wheel), then Bazel runfiles
    (``executorch_trt/py/binding/_runtime_binding.so``), then where Bazel builds it next to the
    delegate library (``<bazel-bin>/py/binding/`` for ``<bazel-bin>/core/libexecutorch_trt.so``).
    Raises ``LibraryNotFoundError`` saying how to build it otherwise.
    """
    path = _from_env_package_or_runfiles(BINDING_ENV, BINDING_RUNFILES_PATH)
    if path:
        return path
    beside = os.path.normpath(os.path.join(os.path.dirname(library_path()), _BINDING_FROM_LIBRARY))
    if os.path.isfile(beside):
        return beside
    raise LibraryNotFoundError(
        f"_runtime_binding.so not found (not at {beside}): build it with "
        "`./bazelw build //py/binding:_runtime_binding.so //core:libexecutorch_trt.so` and set "
        f"{BINDING_ENV}=/path/to/bazel-bin/py/binding/_runtime_binding.so, or run under "
        "`bazel run`/`bazel test` (//py:executorch_trt carries it)"
    )


def library_unavailable_reason() -> str | None:
    """``None`` when ``library_path()`` and ``binding_path()`` find the delegate library and
    the binding, else why not (for a test's skip or failure reason: tests that need the library
    never pass vacuously)."""
    try:
        library_path()
        binding_path()
        return None
    except LibraryNotFoundError as e:
        return str(e)


def _load_binding() -> Any:
    """Imports the binding once per process. It initialises ExecuTorch up front (its PAL, its
    stderr logging, its thread pool): see ``py/binding/runtime_setup.h``."""
    global _binding
    if _binding is None:
        # ExecuTorch's own Python runtime is not imported: it imports executorch.exir (the
        # whole exporter). If the process imports it later, its log function replaces the
        # binding's, and the binding takes the PAL's log entry back before each call.
        path = binding_path()
        spec = importlib.util.spec_from_file_location("_runtime_binding", path)
        if spec is None or spec.loader is None:
            raise LibraryNotFoundError(f"{path} is not a Python extension module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _binding = module
    return _binding


def load_library(path: str | None = None) -> ctypes.CDLL:
    """Opens the runtime binding and then the delegate library once per process
    (``RTLD_GLOBAL``, so it registers into the ``libexecutorch.so`` the binding links), and
    checks that ``"TensorRTBackend"`` is then registered. Raises ``LibraryNotFoundError`` or
    ``RuntimeError``."""
    global _loaded_library
    with _lock:
        if _loaded_library is not None:
            return _loaded_library
        path = path or library_path()  # first: a missing library loads nothing
        binding = _load_binding()
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        if not binding.is_backend_registered(BACKEND_ID):
            raise RuntimeError(
                f"{BACKEND_ID} is not registered after loading {lib._name}; the library must "
                "link the same libexecutorch.so as the runtime binding"
            )
        _loaded_library = lib
        return lib


def binding() -> Any:
    """The runtime binding module, with the delegate library loaded (``load_library``)."""
    load_library()
    return _binding
