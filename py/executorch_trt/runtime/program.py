"""``Program`` and ``Method``: a loaded ``.pte`` whose mutable buffers the caller can read,
bind and own, and its methods (see ``executorch_trt.runtime`` for state and threads)."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch

from executorch_trt.format.scalar_types import torch_dtype
from executorch_trt.runtime.tensors import (
    MethodMetadata,
    TensorSpec,
    input_arg,
    spec_of,
    tensor_from_bytes,
)


class Method:
    """A loaded method of a ``Program``. It keeps its program alive (``load(pte).load_method(name)``
    needs no other reference)."""

    def __init__(self, program: Program, name: str) -> None:
        self._program = program
        self.name = name

    def execute(
        self,
        inputs: Sequence[Any],
        state: Mapping[str, torch.Tensor] | None = None,
        *,
        partial: bool = False,
    ) -> list[Any]:
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
        keep: list[torch.Tensor] = []  # alive until the call returns
        args = [input_arg(x, i, keep) for i, x in enumerate(inputs)]
        program = self._program
        checked = program._check_state(state, partial) if state is not None else None
        with program._lock:
            if checked is not None:
                program._bind_checked(checked)
            program._check_bound_in_place()
            outputs = program._session.execute(self.name, args)
        return [
            tensor_from_bytes(out[0], torch_dtype(out[1]), out[2])
            if isinstance(out, tuple)
            else out
            for out in outputs
        ]

    @property
    def metadata(self) -> MethodMetadata:
        """The method's declared inputs and outputs (``MethodMetadata``)."""
        inputs, outputs = self._program._session.signature(self.name)
        return MethodMetadata(tuple(spec_of(e) for e in inputs), tuple(spec_of(e) for e in outputs))


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
        self._specs: dict[str, TensorSpec] = {
            name: TensorSpec(torch_dtype(code), tuple(sizes))
            for name, code, sizes, _ in session.buffers()
        }
        # What the program reads and writes: the tensor bound and its storage, kept alive here.
        self._bound: dict[str, _Bound] = {}
        # Held by execute and bind_*, around the binding's own lock: a bind_state and an execute
        # (``execute(inputs, state=...)``) run under one hold, and a bound tensor is checked
        # right before the run that uses it.
        self._lock = threading.RLock()
        #: Each buffer's exported initial value (None: zeros), read on first use.
        self._initial_values: dict[str, torch.Tensor | None] | None = None

    @property
    def method_names(self) -> set[str]:
        """The names of the program's methods."""
        return set(self._session.method_names)

    def load_method(self, name: str) -> Method:
        """The method ``name`` (already loaded by ``load``); ``KeyError`` naming the methods if
        the program has none of that name."""
        if name not in self._session.method_names:
            raise KeyError(f"program has no method {name!r} (has {sorted(self.method_names)})")
        return Method(self, name)

    @property
    def buffer_names(self) -> tuple[str, ...]:
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
                "backend_config)"
            )
        raise KeyError(
            f"no mutable buffer named {name!r}; the program's buffers are {list(self._specs)}"
        )

    def buffer(self, name: str) -> torch.Tensor:
        """A tensor viewing the storage the program uses now for buffer ``name`` (no copy):
        the tensor last bound to it, else the program's own memory. Writes through it are seen
        by the next ``execute``; reads see what the last one wrote. A view of the program's own
        memory keeps the program's storage alive; after a ``bind_buffer`` it is no longer the
        storage in use (call ``buffer`` again). A buffer with no elements reads as a new empty
        tensor of its shape.

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
        if view is None and math.prod(spec.shape) == 0:
            return torch.empty(spec.shape, dtype=spec.dtype)  # no elements: nothing to view
        if view is None:
            raise RuntimeError(
                f"buffer {name!r} has no storage: the program was exported with "
                "alloc_mutable_buffers=False, so you provide it: "
                f"bind_buffer({name!r}, torch.zeros({list(spec.shape)}, dtype={spec.dtype})) "
                "or bind_state(new_state())"
            )
        return tensor_from_bytes(view, spec.dtype, spec.shape)

    def new_state(self) -> dict[str, torch.Tensor]:
        """``{name: tensor}`` for every buffer: new tensors (the caller's, contiguous, on the
        CPU) holding the buffer's initial value, i.e. its value in a freshly loaded program
        (the exported value; zeros for a buffer exported without one or with
        ``alloc_mutable_buffers=False``). ``bind_state`` it to start a new conversation.

        Raises ``RuntimeError`` naming ``emit_mutable_buffer_names=True`` for a program without
        buffer names (``buffer_names == ()``): its state cannot be bound by name, so an empty
        state would bind nothing and every "session" would share the program's one state."""
        self._require_names("new_state()")
        return {name: self.initial_value(name) for name in self._specs}

    def initial_value(self, name: str) -> torch.Tensor:
        """A new tensor holding buffer ``name``'s initial value (as ``new_state()`` gives it).
        Raises ``KeyError`` for a name the program does not have."""
        name = self._known(name)
        if self._initial_values is None:  # read once: a program's initial values never change
            initial_values: dict[str, torch.Tensor | None] = {}
            for buffer, spec in self._specs.items():
                initial = self._session.initial_value(buffer)
                initial_values[buffer] = (
                    torch.frombuffer(bytearray(initial), dtype=torch.uint8)
                    .view(spec.dtype)
                    .reshape(spec.shape)
                    if initial
                    else None
                )
            self._initial_values = initial_values
        initial = self._initial_values[name]
        spec = self._specs[name]
        return torch.zeros(spec.shape, dtype=spec.dtype) if initial is None else initial.clone()

    def _check_bindable(self, name: str, tensor: Any) -> tuple[str, int, int]:
        name = self._known(name)
        spec = self._specs[name]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"bind_buffer({name!r}): expected a torch.Tensor of {spec}, got "
                f"{type(tensor).__name__}"
            )
        got = TensorSpec(tensor.dtype, tuple(tensor.shape))
        problems = []
        if got != spec:
            problems.append(f"it is {got}")
        if tensor.device.type != "cpu":
            problems.append(f"it is on {tensor.device}")
        if tensor.layout != torch.strided:
            problems.append(
                f"it is not dense: its layout is {tensor.layout} (to_dense() is a "
                "new tensor: bind that)"
            )
        elif not tensor.is_contiguous():
            problems.append(f"it is not contiguous (strides {tuple(tensor.stride())})")
        if tensor.is_neg() or tensor.is_conj():
            # The bit cannot be resolved in place: its memory holds the values before the lazy
            # negation/conjugation, which is what the program would read and write.
            bit, fix = ("negative", "neg") if tensor.is_neg() else ("conjugate", "conj")
            problems.append(
                f"it has the {bit} bit set (a lazy {bit} view: its memory holds "
                f"the values before it; resolve_{fix}() is a new tensor: bind that)"
            )
        if problems:
            raise ValueError(
                f"cannot bind buffer {name!r}: it is {spec} (dense, contiguous, on the CPU) but "
                f"the tensor given is not: {'; '.join(problems)}. Pass a contiguous CPU tensor "
                f"of {spec}, e.g. from new_state()"
            )
        return name, tensor.data_ptr(), tensor.numel() * tensor.element_size()

    def _check_in_place(self, name: str, bound: _Bound) -> None:
        """``RuntimeError`` naming buffer ``name`` when the tensor bound to it no longer views
        the memory the program was given (the program would run on memory the tensor left,
        freed by a reallocating ``resize_``)."""
        t, spec = bound.tensor, self._specs[name]
        if (
            t.data_ptr() == bound.data_ptr
            and t.dtype == spec.dtype
            and tuple(t.shape) == spec.shape
            and t.is_contiguous()
        ):
            return
        raise RuntimeError(
            f"buffer {name!r}: the tensor bound to it no longer views the memory that was bound "
            f"(data_ptr {bound.data_ptr:#x}, now {t.data_ptr():#x}; {spec} expected, it is "
            f"{TensorSpec(t.dtype, tuple(t.shape))}): t.set_(), a reallocating t.resize_() or "
            "t.data = ... moved it, and the program will not run on the memory it left. Bind it "
            f"again: bind_buffer({name!r}, t) (its contents become the buffer's value)"
        )

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
            "state needs no session: call execute(inputs) without state"
        )

    def _check_entries(self, state: Mapping[str, torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
        checked = []
        for name, tensor in state.items():
            self._check_bindable(name, tensor)
            checked.append((name, tensor))
        return checked

    def _check_state(
        self, state: Mapping[str, torch.Tensor], partial: bool
    ) -> list[tuple[str, torch.Tensor]]:
        """``state`` checked for ``bind_state(state, partial)`` (see there), nothing bound."""
        if not isinstance(state, Mapping):
            raise TypeError(
                "bind_state: expected a mapping {name: tensor} (e.g. new_state()), "
                f"got {type(state).__name__}"
            )
        self._require_names("bind_state()")
        for name in state:
            self._known(name)  # an unknown name is a KeyError before a missing one is reported
        missing = [name for name in self._specs if name not in state]
        if missing and not partial:
            raise ValueError(
                f"bind_state(): the state has no tensor for buffer(s) {missing} (the program's "
                f"buffers are {list(self._specs)}); they would stay bound to the previous "
                "session. Pass every buffer (new_state() has them all), or bind only these on "
                "purpose with bind_state(state, partial=True)"
            )
        return self._check_entries(state)

    def _bind_checked(self, checked: list[tuple[str, torch.Tensor]]) -> None:
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
