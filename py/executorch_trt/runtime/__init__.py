"""Loading and running ``.pte`` programs from Python, with caller-owned state.

``executorch_trt.runtime`` runs programs on the project's own binding over ExecuTorch's C++
runtime (``_runtime_binding``, built from ``//py/binding``: ExecuTorch's ``Program`` and
``Method`` with shared memory arenas, the same ``LoadedProgram`` as the C++ runner,
``extension/program/loaded_program.h``). The delegate library (``libexecutorch_trt.so``, built from
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

from executorch_trt.runtime.counters import (
    bytes_copied,
    cross_attn_cache_updates,
    gqa_attention_positions_read,
)
from executorch_trt.runtime.library import (
    BINDING_ENV,
    BINDING_RUNFILES_PATH,
    LIBRARY_ENV,
    RUNFILES_PATH,
    LibraryNotFoundError,
    binding_path,
    library_path,
    library_unavailable_reason,
    load_library,
)
from executorch_trt.runtime.loading import load
from executorch_trt.runtime.program import Method, Program
from executorch_trt.runtime.tensors import MethodMetadata, TensorSpec

__all__ = [
    "load",
    "Program",
    "Method",
    "TensorSpec",
    "MethodMetadata",
    "LibraryNotFoundError",
    "library_path",
    "binding_path",
    "library_unavailable_reason",
    "load_library",
    "bytes_copied",
    "cross_attn_cache_updates",
    "gqa_attention_positions_read",
    "LIBRARY_ENV",
    "BINDING_ENV",
    "RUNFILES_PATH",
    "BINDING_RUNFILES_PATH",
]
