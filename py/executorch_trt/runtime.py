"""Loading and running ``.pte`` programs from Python, with caller-owned state.

``executorch_trt.runtime`` runs programs on the project's own binding over ExecuTorch's C++
runtime (``_runtime_binding``, built from ``//py/binding``: ExecuTorch's ``Program`` and
``Method`` with shared memory arenas, the same ``LoadedProgram`` as the C++ runner,
``core/program/loaded_program.h``). The delegate library (``libexecutorch_trt.so``, built from
``//core``) registers the ``"TensorRTBackend"`` backend and its kernels in the same
``libexecutorch.so`` the binding links; ``load`` opens it with ``ctypes.CDLL(path,
RTLD_GLOBAL)``. Programs without the delegate load and run as well.

::

    prog = runtime.load("model.pte")         # path, bytes or binary file object
    decode = prog.load_method("decode")      # decode.execute([tokens, positions]) -> [logits]
    prog.buffer_names                        # ("key_cache_0", ...): the mutable buffers
    prog.buffer("key_cache_0")               # a tensor viewing the storage in use (no copy)
    state = prog.new_state()                 # {name: fresh tensor at the initial value}
    prog.bind_state(state)                   # every method now updates these tensors in place
    decode.execute([tokens, positions], state=state)  # bind and run at once (threads)

State: every method of a program shares its mutable buffers (``prefill`` writes the cache that
``decode`` reads). A fresh ``load`` starts from each buffer's exported initial value (all
methods are loaded up front, before anything runs: loading a method re-initialises the shared
buffers). ``bind_buffer``/``bind_state`` point buffers at tensors the caller owns; binding
another state switches the program to another conversation, and a state's tensors can be read,
zeroed, cloned (a snapshot) and bound again at any time between calls. A bound tensor must stay
where it is (no ``set_``, reallocating ``resize_`` or ``.data =``: ``execute`` then raises until
it is bound again), and each buffer needs memory of its own (overlapping bindings raise).

Thread safety: a ``Program`` (and its ``Method`` objects) may be used from several threads:
``execute``, ``bind_buffer`` and ``bind_state`` hold the program's lock, so calls on one program
run one at a time (``bind_state`` binds all its tensors between two executes). A ``bind_state``
followed by an ``execute`` is two calls, though, and another thread's calls can come between
them: threads that each run their own session on one program bind and run in one call,
``method.execute(inputs, state=state)`` (one hold of the lock), or use one program per thread.
Separate programs share nothing and run in parallel. ``execute`` releases the GIL, and nothing
under it takes the GIL back: ExecuTorch's log lines go straight to file descriptor 2, never
through Python (whose ``sys.stderr`` redirect deadlocked two threads' first executes and aborted
the process on a name with invalid UTF-8). Tensors from ``buffer()``/``new_state()`` are read
and written by you without the lock: do so between calls, not while another thread executes.

Names need a program exported with ``emit_mutable_buffer_names=True`` (the default of
``executorch_trt.export``): without them ``new_state``/``bind_state`` raise rather than let
every session share the program's one state, and a ``bind_state`` must name every buffer unless
it says ``partial=True``.
"""

from __future__ import annotations

import ctypes
import errno
import importlib.util
import io
import os
import threading
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

import torch

from executorch_trt.scalar_types import scalar_type_code, torch_dtype
from executorch_trt.wire import BACKEND_ID

LIBRARY_ENV = "EXECUTORCH_TRT_LIBRARY"
RUNFILES_PATH = "executorch_trt/core/libexecutorch_trt.so"
BINDING_ENV = "EXECUTORCH_TRT_BINDING"
BINDING_RUNFILES_PATH = "executorch_trt/py/binding/_runtime_binding.so"
# Where the binding is built relative to the delegate library (bazel-bin/ and runfiles alike).
_BINDING_FROM_LIBRARY = os.path.join("..", "py", "binding", "_runtime_binding.so")
# The installed wheel's location of both libraries: beside this file.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_loaded_library: Optional[ctypes.CDLL] = None
_binding: Any = None


class LibraryNotFoundError(RuntimeError):
    """The delegate library or the runtime binding could not be located (see ``library_path``,
    ``binding_path``)."""


def _runfiles_location(path: str) -> Optional[str]:
    try:
        from runfiles import Runfiles  # PyPI: bazel-runfiles
    except ImportError:
        return None
    r = Runfiles.Create()
    found = r.Rlocation(path) if r is not None else None
    return found if found and os.path.isfile(found) else None


def _from_env_package_or_runfiles(env_name: str, runfiles_path: str) -> Optional[str]:
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
    return _runfiles_location(runfiles_path)


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


def library_unavailable_reason() -> Optional[str]:
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
        # The stock Python runtime, if it is going to be used at all, is imported first: it
        # registers its own (GIL-taking) log function at import, which the binding then
        # replaces once rather than at every call.
        import executorch.extension.pybindings.portable_lib  # noqa: F401

        path = binding_path()
        spec = importlib.util.spec_from_file_location("_runtime_binding", path)
        if spec is None or spec.loader is None:
            raise LibraryNotFoundError(f"{path} is not a Python extension module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _binding = module
    return _binding


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
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


def gqa_attention_positions_read() -> int:
    """How many (query row, key position) pairs ``executorch_trt::gqa_attention.out`` has
    attended in this process (cumulative, all loaded programs): a decode step at position ``p``
    under a causal mask adds ``layers * query_heads * (p + 1)`` whatever the cache's capacity,
    because the kernel skips the positions the mask excludes. Reads
    ``executorch_trt_gqa_attention_positions_read()`` (``core/kernels/gqa_attention.h``)."""
    fn = load_library().executorch_trt_gqa_attention_positions_read
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())


class TensorSpec(NamedTuple):
    """A tensor's dtype and shape as the program declares it."""

    dtype: torch.dtype
    shape: Tuple[int, ...]

    def __str__(self) -> str:
        return f"{str(self.dtype).replace('torch.', '')} {list(self.shape)}"


class MethodMetadata(NamedTuple):
    """A method's declared inputs and outputs, in order: a ``TensorSpec`` per tensor, ``None``
    for a value that is not a tensor (an int, a float, a bool)."""

    inputs: Tuple[Optional[TensorSpec], ...]
    outputs: Tuple[Optional[TensorSpec], ...]


def _spec(entry: tuple) -> Optional[TensorSpec]:
    return TensorSpec(torch_dtype(entry[0]), tuple(entry[1])) if entry else None


def _tensor_from_bytes(data: Any, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """A tensor viewing ``data`` (a writable buffer; the tensor keeps it alive), no copy."""
    if len(data) == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).view(tuple(shape))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _input_arg(x: Any, index: int, keep: List[torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"input {index}: a tensor on {x.device}; ExecuTorch runs on CPU "
                             "tensors (pass x.cpu())")
        if x.layout != torch.strided:
            raise ValueError(f"input {index}: a tensor of layout {x.layout}; ExecuTorch takes "
                             "dense (strided) tensors (pass x.to_dense())")
        # A negative or conjugate view's memory holds the values before negation/conjugation
        # (and contiguous() keeps the bit): resolve them, a copy, so the method sees the values.
        x = x.resolve_conj().resolve_neg()
        if not x.is_contiguous():
            x = x.contiguous()
        keep.append(x)
        return (x.data_ptr(), scalar_type_code(x.dtype), tuple(x.shape))
    if isinstance(x, int) and not isinstance(x, bool) and not _INT64_MIN <= x <= _INT64_MAX:
        raise ValueError(f"input {index}: the int {x} does not fit in int64 (ExecuTorch's int, "
                         f"[{_INT64_MIN}, {_INT64_MAX}])")
    if x is None or isinstance(x, (bool, int, float)):
        return x
    raise TypeError(f"input {index}: expected a torch.Tensor, int, float, bool or None, got "
                    f"{type(x).__name__}")


class Method:
    """A loaded method of a ``Program``. It keeps its program alive (``load(pte).load_method(name)``
    needs no other reference)."""

    def __init__(self, program: "Program", name: str) -> None:
        self._program = program
        self.name = name

    def execute(self, inputs: Sequence[Any],
                state: Optional[Mapping[str, torch.Tensor]] = None, *,
                partial: bool = False) -> List[Any]:
        """Runs the method on ``inputs`` (in the method's input order) and returns its user
        outputs as a list: tensors (copies, which the next call does not touch) and scalars.

        The program's mutable buffers persist across calls and are shared by its methods; a
        buffer bound with ``bind_buffer``/``bind_state`` is updated in place in your tensor.
        ``state`` (``{name: tensor}``, e.g. from ``new_state()``) is
        ``bind_state(state, partial=partial)`` and the run under one hold of the program's lock:
        no other thread's call comes between, so threads can run their own sessions on one
        program (see the module notes on threads). As there, ``state`` must have every buffer
        of the program unless ``partial=True``.

        Tensor inputs must be dense CPU tensors of the declared dtype and shape. They are
        passed in contiguous layout: a tensor that is not contiguous (``channels_last``, a
        transpose, an ``expand``, a slice with a step) is passed as ``t.contiguous()``, and a
        negative or conjugate view (``torch._neg_view``, ``conj()`` of a complex tensor) as
        ``t.resolve_conj().resolve_neg()``, copies, so its values are what the method sees; a
        contiguous tensor is not copied. Ints (int64), floats, bools and ``None`` pass through.

        Raises ``ValueError`` for the wrong number of inputs or an input the method does not
        take (naming its index, what was given and what the method declares; also a sparse
        tensor or an int outside int64), ``TypeError`` for a value that is neither a tensor nor
        a scalar, as ``bind_state`` for a bad ``state`` (a state missing buffers, a program
        without buffer names: then nothing is bound and nothing runs), ``RuntimeError``
        naming the buffer when a bound tensor no longer views the memory bound to it (after
        ``t.set_()``, a reallocating ``t.resize_()``, ``t.data = ...``: bind it again) or a
        buffer exported with ``alloc_mutable_buffers=False`` was never bound (nothing runs),
        and ``RuntimeError`` when the method fails, with the error code's number and name and
        the reason ExecuTorch and the delegate logged (also on stderr), e.g. an index out of
        range, or a dynamic size outside its range or given two values by two inputs, named by
        its ``torch.export.Dim``. An input ExecuTorch rejects is a ``ValueError`` naming its
        index, what was given and what the method declares: for a dynamic input, its shape's
        upper bound (``"with shape at most [1, 64]"``) and the dimensions above it. The GIL is
        released while the method runs; see the module notes on threads.
        """
        keep: List[torch.Tensor] = []  # alive until the call returns
        args = [_input_arg(x, i, keep) for i, x in enumerate(inputs)]
        program = self._program
        checked = program._check_state(state, partial) if state is not None else None
        with program._lock:
            if checked is not None:
                program._bind_checked(checked)
            program._check_bound_in_place()
            outputs = program._session.execute(self.name, args)
        return [
            _tensor_from_bytes(out[0], torch_dtype(out[1]), out[2]) if isinstance(out, tuple)
            else out
            for out in outputs
        ]

    @property
    def metadata(self) -> MethodMetadata:
        """The method's declared inputs and outputs (``MethodMetadata``)."""
        inputs, outputs = self._program._session.signature(self.name)
        return MethodMetadata(tuple(_spec(e) for e in inputs), tuple(_spec(e) for e in outputs))


class _Bound(NamedTuple):
    """A buffer bound to a caller's tensor: the tensor, its storage (kept alive: the program
    keeps using that memory if the tensor is pointed elsewhere) and the address bound."""

    tensor: torch.Tensor
    storage: Any
    data_ptr: int


class Program:
    """A loaded program; each ``load`` is an independent instance with its own state. Every
    method is loaded at construction (see the module notes). Use ``runtime.load`` to make one.
    """

    def __init__(self, session: Any) -> None:
        self._session = session
        self._specs: Dict[str, TensorSpec] = {
            name: TensorSpec(torch_dtype(code), tuple(sizes))
            for name, code, sizes, _ in session.buffers()
        }
        # What the program reads and writes: the tensor bound and its storage, kept alive here.
        self._bound: Dict[str, _Bound] = {}
        # Held by execute and bind_*, around the binding's own lock: a bind_state and an execute
        # (``execute(inputs, state=...)``) run under one hold, and a bound tensor is checked
        # right before the run that uses it.
        self._lock = threading.RLock()

    @property
    def method_names(self) -> Set[str]:
        """The names of the program's methods."""
        return set(self._session.method_names)

    def load_method(self, name: str) -> Method:
        """The method ``name`` (already loaded by ``load``); ``KeyError`` naming the methods if
        the program has none of that name."""
        if name not in self._session.method_names:
            raise KeyError(f"program has no method {name!r} (has {sorted(self.method_names)})")
        return Method(self, name)

    @property
    def buffer_names(self) -> Tuple[str, ...]:
        """The names (FQNs, as exported: ``"key_cache_0"``, ``"layers.0.attn.k_cache"``) of the
        program's mutable buffers, in the order its methods declare them. Empty for a program
        exported with ``emit_mutable_buffer_names=False`` (or without mutable buffers)."""
        return tuple(self._specs)

    def buffer_spec(self, name: str) -> TensorSpec:
        """The dtype and shape of buffer ``name`` (``KeyError`` as ``buffer``)."""
        return self._specs[self._known(name)]

    def _known(self, name: str) -> str:
        if name in self._specs:
            return name
        if not self._specs:
            raise KeyError(
                f"no mutable buffer named {name!r}: this program has no named mutable buffers; "
                "export it with emit_mutable_buffer_names=True (executorch_trt.export or "
                "backend_config)")
        raise KeyError(f"no mutable buffer named {name!r}; the program's buffers are "
                       f"{list(self._specs)}")

    def buffer(self, name: str) -> torch.Tensor:
        """A tensor viewing the storage the program uses now for buffer ``name`` (no copy):
        the tensor last bound to it, else the program's own memory. Writes through it are seen
        by the next ``execute``; reads see what the last one wrote. A view of the program's own
        memory keeps the program's storage alive; after a ``bind_buffer`` it is no longer the
        storage in use (call ``buffer`` again).

        Raises ``KeyError`` for an unknown name (listing the names; naming the export option
        when the program has none), ``RuntimeError`` for a buffer with no storage (exported
        with ``alloc_mutable_buffers=False`` and not bound yet: ``bind_buffer``) and
        ``RuntimeError`` naming the buffer when the tensor bound to it no longer views the
        memory bound (see ``bind_buffer``)."""
        name = self._known(name)
        bound = self._bound.get(name)
        if bound is not None:
            self._check_in_place(name, bound)
            return bound.tensor
        view = self._session.buffer_view(name)
        spec = self._specs[name]
        if view is None:
            raise RuntimeError(
                f"buffer {name!r} has no storage: the program was exported with "
                "alloc_mutable_buffers=False, so you provide it: "
                f"bind_buffer({name!r}, torch.zeros({list(spec.shape)}, dtype={spec.dtype})) "
                "or bind_state(new_state())")
        return _tensor_from_bytes(view, spec.dtype, spec.shape)

    def new_state(self) -> Dict[str, torch.Tensor]:
        """``{name: tensor}`` for every buffer: new tensors (the caller's, contiguous, on the
        CPU) holding the buffer's initial value, i.e. its value in a freshly loaded program
        (the exported value; zeros for a buffer exported without one or with
        ``alloc_mutable_buffers=False``). ``bind_state`` it to start a new conversation.

        Raises ``RuntimeError`` naming ``emit_mutable_buffer_names=True`` for a program without
        buffer names (``buffer_names == ()``): its state cannot be bound by name, so an empty
        state would bind nothing and every "session" would share the program's one state."""
        self._require_names("new_state()")
        state = {}
        for name, spec in self._specs.items():
            t = torch.zeros(spec.shape, dtype=spec.dtype)
            initial = self._session.initial_value(name)
            if initial:
                t.reshape(-1).view(torch.uint8).copy_(
                    torch.frombuffer(bytearray(initial), dtype=torch.uint8))
            state[name] = t
        return state

    def _check_bindable(self, name: str, tensor: Any) -> Tuple[str, int, int]:
        name = self._known(name)
        spec = self._specs[name]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"bind_buffer({name!r}): expected a torch.Tensor of {spec}, got "
                            f"{type(tensor).__name__}")
        got = TensorSpec(tensor.dtype, tuple(tensor.shape))
        problems = []
        if got != spec:
            problems.append(f"it is {got}")
        if tensor.device.type != "cpu":
            problems.append(f"it is on {tensor.device}")
        if tensor.layout != torch.strided:
            problems.append(f"it is not dense: its layout is {tensor.layout} (to_dense() is a "
                            "new tensor: bind that)")
        elif not tensor.is_contiguous():
            problems.append(f"it is not contiguous (strides {tuple(tensor.stride())})")
        if tensor.is_neg() or tensor.is_conj():
            # The bit cannot be resolved in place: its memory holds the values before the lazy
            # negation/conjugation, which is what the program would read and write.
            bit, fix = ("negative", "neg") if tensor.is_neg() else ("conjugate", "conj")
            problems.append(f"it has the {bit} bit set (a lazy {bit} view: its memory holds "
                            f"the values before it; resolve_{fix}() is a new tensor: bind that)")
        if problems:
            raise ValueError(
                f"cannot bind buffer {name!r}: it is {spec} (dense, contiguous, on the CPU) but "
                f"the tensor given is not: {'; '.join(problems)}. Pass a contiguous CPU tensor "
                f"of {spec}, e.g. from new_state()")
        return name, tensor.data_ptr(), tensor.numel() * tensor.element_size()

    def _check_in_place(self, name: str, bound: "_Bound") -> None:
        """``RuntimeError`` naming buffer ``name`` when the tensor bound to it no longer views
        the memory the program was given (the program would run on memory the tensor left,
        freed by a reallocating ``resize_``)."""
        t, spec = bound.tensor, self._specs[name]
        if (t.data_ptr() == bound.data_ptr and t.dtype == spec.dtype
                and tuple(t.shape) == spec.shape and t.is_contiguous()):
            return
        raise RuntimeError(
            f"buffer {name!r}: the tensor bound to it no longer views the memory that was bound "
            f"(data_ptr {bound.data_ptr:#x}, now {t.data_ptr():#x}; {spec} expected, it is "
            f"{TensorSpec(t.dtype, tuple(t.shape))}): t.set_(), a reallocating t.resize_() or "
            "t.data = ... moved it, and the program will not run on the memory it left. Bind it "
            f"again: bind_buffer({name!r}, t) (its contents become the buffer's value)")

    def _check_bound_in_place(self, skip: Sequence[str] = ()) -> None:
        for name, bound in self._bound.items():
            if name not in skip:
                self._check_in_place(name, bound)

    def _require_names(self, call: str) -> None:
        """``RuntimeError`` when the program has no named buffers: a session (a state bound by
        name) cannot be told apart from the program's own state there."""
        if self._specs:
            return
        raise RuntimeError(
            f"{call}: this program has no named mutable buffers, so no state can be bound: "
            "every session would share the program's one state. If the program has state "
            "(e.g. a KV cache), export it with emit_mutable_buffer_names=True (the default of "
            "executorch_trt.export; backend_config for to_executorch); a program with no "
            "state needs no session: call execute(inputs) without state")

    def _check_entries(self, state: Mapping[str, torch.Tensor]) -> List[Tuple[str, torch.Tensor]]:
        checked = []
        for name, tensor in state.items():
            self._check_bindable(name, tensor)
            checked.append((name, tensor))
        return checked

    def _check_state(self, state: Mapping[str, torch.Tensor],
                     partial: bool) -> List[Tuple[str, torch.Tensor]]:
        """``state`` checked for ``bind_state(state, partial)`` (see there), nothing bound."""
        if not isinstance(state, Mapping):
            raise TypeError("bind_state: expected a mapping {name: tensor} (e.g. new_state()), "
                            f"got {type(state).__name__}")
        self._require_names("bind_state()")
        for name in state:
            self._known(name)  # an unknown name is a KeyError before a missing one is reported
        missing = [name for name in self._specs if name not in state]
        if missing and not partial:
            raise ValueError(
                f"bind_state(): the state has no tensor for buffer(s) {missing} (the program's "
                f"buffers are {list(self._specs)}); they would stay bound to the previous "
                "session. Pass every buffer (new_state() has them all), or bind only these on "
                "purpose with bind_state(state, partial=True)")
        return self._check_entries(state)

    def _bind_checked(self, checked: List[Tuple[str, torch.Tensor]]) -> None:
        """Binds ``_check_state``'s result; the caller holds ``_lock``."""
        # Rechecked under the lock: another thread may have changed a tensor since.
        entries = [self._check_bindable(name, t) for name, t in checked]
        # A stale binding left in place would also make the overlap check compare against
        # memory that may be freed and reused: it must be rebound first (or in this call).
        self._check_bound_in_place(skip=[name for name, _ in checked])
        self._session.bind_buffers(entries)
        for (name, data_ptr, _), (_, tensor) in zip(entries, checked):
            self._bound[name] = _Bound(tensor, tensor.untyped_storage(), data_ptr)

    def bind_buffer(self, name: str, tensor: torch.Tensor) -> None:
        """From now on every method of the program reads and writes buffer ``name`` in
        ``tensor``'s storage, in place (``tensor`` keeps its ``data_ptr``; its current contents
        are the buffer's value). The program holds a reference to ``tensor`` and to its storage
        until another tensor is bound to the buffer, so it stays valid even if you drop yours.
        Keep the tensor where it is: after ``tensor.set_()``, a reallocating ``resize_()`` or
        ``tensor.data = ...`` it no longer views that memory, and ``execute`` raises (naming
        the buffer) until the buffer is bound again.

        Raises ``KeyError`` for an unknown name (listing the names), ``TypeError`` for a
        non-tensor, ``ValueError`` naming the buffer and both specs when ``tensor``'s dtype or
        shape differ from the buffer's, or it is not dense (sparse), not contiguous, not on the
        CPU, or has the negative or conjugate bit set (``torch._neg_view``: bind
        ``t.resolve_neg()``); ``ValueError`` naming both buffers when its memory overlaps the
        memory of another buffer (one tensor bound to two buffers, overlapping views; disjoint
        views of one tensor are fine); ``RuntimeError`` naming the buffer when another bound
        buffer's tensor has moved (bind that one again first, or in the same ``bind_state``).
        Waits for an ``execute`` running in another thread to finish."""
        checked = self._check_entries({name: tensor})  # one buffer: a partial bind, by name
        with self._lock:
            self._bind_checked(checked)

    def bind_state(self, state: Mapping[str, torch.Tensor], *, partial: bool = False) -> None:
        """``bind_buffer`` for every entry of ``state`` (``{name: tensor}``, e.g. from
        ``new_state()``), all checked before any is bound and bound between two executes: one
        call switches the program to another conversation. ``state`` must have a tensor for
        every buffer of the program (``buffer_names``), so that nothing of the previous session
        stays bound; ``partial=True`` binds only the buffers in ``state`` (the others keep
        their current storage).

        Raises as ``bind_buffer`` (then nothing is bound); ``ValueError`` naming the missing
        buffers when ``state`` lacks some and ``partial`` is false; ``RuntimeError`` naming
        ``emit_mutable_buffer_names=True`` for a program without buffer names (even for an
        empty ``state``: there a session could not be told apart from the program's own
        state); ``TypeError`` when ``state`` is not a mapping. Nothing is bound when it raises.
        From several threads, bind and run with ``method.execute(inputs, state=state)``: a
        ``bind_state`` then an ``execute`` are two calls, and another thread's may come between
        them."""
        checked = self._check_state(state, partial)
        with self._lock:
            self._bind_checked(checked)


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


def _data_source(data: Any) -> str:
    """``load``'s ``data`` as a path string: ``TypeError`` unless ``str``/``os.PathLike``,
    ``FileNotFoundError`` naming it unless it is an existing file."""
    if not isinstance(data, (str, os.PathLike)):
        raise TypeError("executorch_trt.runtime.load: data must be the path of a .ptd file "
                        f"(str or pathlib.Path), got {type(data).__name__}")
    path = os.fsdecode(os.fspath(data))
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "executorch_trt.runtime.load: no such .ptd file",
                                path)
    return path


_TEXT_MODE = ("executorch_trt.runtime.load: {} is a file object in text mode; a .pte is binary: "
              "open the file in binary mode (open(path, 'rb')) or pass its path")


def load(program: Union[str, Path, bytes, bytearray, BinaryIO],
         data: Optional[Union[str, Path]] = None) -> Program:
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
    data = _program_source(program)
    load_library()
    if isinstance(data, str):
        return Program(_binding.load_file(data, data_path))
    if hasattr(data, "read"):
        source = getattr(program, "name", type(program).__name__)
        data = data.read()
        if isinstance(data, str):
            raise TypeError(_TEXT_MODE.format(source))
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"executorch_trt.runtime.load: {source}.read() returned "
                            f"{type(data).__name__}, not bytes: pass a binary file object")
        what = f"the .pte read from {source}"
    else:
        what = f"the {len(data)} bytes of a .pte"
    return Program(_binding.load_bytes(data, what, data_path))
