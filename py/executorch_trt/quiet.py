"""Quiet by default: what importing ``executorch_trt``, exporting and running print.

A script that imports the package, exports a small model and runs it prints only what needs its
user's attention (the product's ``NotInPlaceWarning``, an error). What is dropped, and why:

* torchao's ``Failed to load .../torchao/_C_mxfp8...so`` / ``_C_cutlass_90a...so`` warnings
  (logger ``torchao``) and torch's ``<enum 'KernelPreference'> is an Enum subclass ...``
  warning (logger ``torch.utils._pytree``): logged when anything imports ``executorch.exir``
  (this package's exporter, or ExecuTorch's own Python runtime), which imports torchao. They are
  about torchao's CUDA kernels and its own enum, nothing a user of this package can act on.
  ``import executorch_trt`` puts a logging filter on those two loggers (``drop_import_noise``)
  that drops exactly those messages, whenever the import happens.
* torch's ``isinstance(treespec, LeafSpec) is deprecated`` ``FutureWarning``: torch 2.13
  warns when ``copy.deepcopy`` reconstructs its own ``LeafSpec`` objects, which torch.export's
  ``run_decompositions`` and ExecuTorch's ``to_backend`` do while lowering. Dropped inside
  ``lowering()`` (a ``warnings.catch_warnings()`` around the lowering calls).
* torch.export's ``While compiling, we found certain side effects happened in the
  model.forward`` ``UserWarning`` when the only side effect listed is transformers' own
  output-capturing context variable (``_active_collector``, set and reset inside every
  transformers forward): ``export_llm`` exports inside ``lowering()``. A warning that lists any
  other side effect still shows.
* ExecuTorch's C++ debug and info log lines (``Failed to open midr file`` from cpuinfo while
  the thread pool starts, a delegate's binding plan): the runtime binding writes error and
  fatal lines only (``py/binding/stderr_log.h``). Its ``register_pal() called multiple times``
  line is gone at the cause: the binding no longer calls ``register_pal`` a second time.
* ExecuTorch's ``Mutation on a buffer ... meaningless initial state`` warning for buffers that
  are initialised (``et_init_buffer``): ``lowering/emitter_fixes.py``.

Verbose mode shows all of it: ``EXECUTORCH_TRT_VERBOSE`` set to anything but ``""`` or ``0``
in the environment of the process (the C++ side reads it once, when ``import executorch_trt``
loads the runtime binding; this module at each call). The package's own log records go to the
``executorch_trt`` logger (``logger``), e.g. why the delegate library was not registered at
import, at ``DEBUG``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from collections.abc import Iterator

VERBOSE_ENV = "EXECUTORCH_TRT_VERBOSE"
logger = logging.getLogger("executorch_trt")

# (logger name, message pattern) of the import-time records ``drop_import_noise`` drops.
_IMPORT_RECORDS: tuple[tuple[str, str], ...] = (
    ("torchao", r"Failed to load .*torchao/_C\w*[.\w-]*\.so"),
    (
        "torch.utils._pytree",
        (
            r"is an Enum subclass and is now natively supported by "
            r"torch\.compile"
        ),
    ),
)
# Message patterns (re.match, as ``warnings.filterwarnings`` takes them) of the warnings dropped
# by ``lowering()``.
_LOWERING_WARNINGS: tuple[tuple[str, type], ...] = (
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
    # Only when transformers' output-capturing context variable is the sole side effect listed.
    (
        (
            r"While compiling, we found certain side effects happened in the model\.forward\. "
            r"Here are the list of potential sources you can double check: "
            r"\[(?:\"[^\"]*\._active_collector\"(?:, )?)+\]\Z"
        ),
        UserWarning,
    ),
)


def verbose() -> bool:
    """Whether everything is shown: ``$EXECUTORCH_TRT_VERBOSE`` is set to anything but ``""``
    or ``"0"`` (the rule ``py/binding/runtime_setup.h`` applies too). Read at each call."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


class _DropMessages(logging.Filter):
    """Drops a logger's records whose formatted message matches ``pattern`` (re.search), except
    in verbose mode (read at each record)."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self._pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return verbose() or not self._pattern.search(record.getMessage())


_installed = False


def drop_import_noise() -> None:
    """Installs, once per process, the filters that drop torchao's and torch's import-time
    records listed in this module's docstring (``import executorch_trt`` calls it)."""
    global _installed
    if _installed:
        return
    for name, pattern in _IMPORT_RECORDS:
        logging.getLogger(name).addFilter(_DropMessages(pattern))
    _installed = True


@contextlib.contextmanager
def lowering() -> Iterator[None]:
    """Around ExecuTorch's lowering calls (``to_edge_transform_and_lower``, ``to_executorch``):
    drops torch's ``LeafSpec`` deprecation warnings, which torch itself causes (nothing in
    verbose mode). Every other warning, ``NotInPlaceWarning`` included, goes through as
    before. Like ``warnings.catch_warnings``, not thread-safe."""
    if verbose():
        yield
        return
    with warnings.catch_warnings():
        for message, category in _LOWERING_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield
