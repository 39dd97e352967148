"""The ``"TensorRTBackend"`` backend registered with ExecuTorch's runtime in this process.

``import executorch_trt`` calls ``register_at_import()``: when the delegate library is found
(``runtime.library_path()``: ``$EXECUTORCH_TRT_LIBRARY``, the installed package, Bazel runfiles)
it is loaded once (``runtime.load_library()``: the runtime binding, then
``libexecutorch_trt.so`` with ``RTLD_GLOBAL``), and its static initialisers register the backend
and its kernels in the process's one ``libexecutorch.so``, the one that ExecuTorch's own Python
runtimes link as well: ``executorch.runtime.Runtime``, ``portable_lib._load_for_executorch``
and ``executorch.extension.llm.runner`` then load programs with TensorRTBackend delegates, as
``executorch_trt.runtime`` does. ``register()`` is the same, explicit, and raises when it
cannot.

When nothing is found (an export-only environment), the import stays silent and working; a
program with the delegate then fails to load in a stock runtime with ExecuTorch's
``Backend TensorRTBackend is not registered.`` (logged) and ``RuntimeError: Failed to load
method forward, error: 0x:20``, and ``register()`` raises ``LibraryNotFoundError`` saying where
it looked and how to get the library. A library that is configured or found but does not load
(``$EXECUTORCH_TRT_LIBRARY`` naming no file, a dlopen error) is a ``RuntimeWarning`` at import.
"""

from __future__ import annotations

import os
import warnings
from typing import NamedTuple

from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.quiet import logger
from executorch_trt.runtime import library


class Registration(NamedTuple):
    """What ``register()`` loaded: the backend's name and the two libraries' paths."""

    backend: str  # "TensorRTBackend", the name delegates in a .pte refer to
    library: str  # libexecutorch_trt.so (the backend, its kernels)
    binding: str  # _runtime_binding.so (executorch_trt.runtime's binding)


def register() -> Registration:
    """Registers the ``"TensorRTBackend"`` backend (and the delegate's kernels) with ExecuTorch's
    runtime in this process, for every ExecuTorch runtime in it (``executorch.runtime``,
    ``portable_lib``, the LLM runner, ``executorch_trt.runtime``). Idempotent and thread-safe:
    the libraries are loaded once per process; later calls return the same ``Registration``.

    Raises ``runtime.LibraryNotFoundError`` when the delegate library or the runtime binding is
    not found (the message says where it looked and how to get it), ``OSError`` when one does not
    load, ``RuntimeError`` when the backend is not registered after loading.
    """
    lib = library.load_library()
    return Registration(BACKEND_ID, lib._name, library.binding().__file__)


def register_at_import() -> Registration | None:
    """``register()`` without raising, for ``import executorch_trt``: ``None`` when it failed.
    Silent when no library is found and none was configured (export-only use; the reason is
    logged to the ``executorch_trt`` logger at ``DEBUG``); a ``RuntimeWarning`` otherwise."""
    try:
        return register()
    except library.LibraryNotFoundError as e:
        configured = [
            name for name in (library.LIBRARY_ENV, library.BINDING_ENV) if os.environ.get(name)
        ]
        if not configured:
            logger.debug(
                "%s is not registered (exporting works; loading its programs does not): %s",
                BACKEND_ID,
                e,
            )
            return None
        reason = str(e)
    except (OSError, ImportError, RuntimeError) as e:
        reason = f"{type(e).__name__}: {e}"
    warnings.warn(
        f"executorch_trt: {BACKEND_ID} is not registered, so programs that use it "
        f"do not load in this process (exporting works): {reason}",
        RuntimeWarning,
        stacklevel=3,
    )
    return None
