"""``load``: an LLM program (``.pte``) whose conversations are objects (``Session``).

The program is one of ExecuTorch's LLM forms over a static KV cache held as its mutable buffers:

* ``forward(tokens int64 [1, T], positions int64 [T] or [1])`` with a dynamic ``T`` (what
  ``export_llm`` writes and ``TextLLMRunner`` runs): the prompt in chunks of up to
  ``max_seq_len`` tokens, then one token per call;
* ``prefill(tokens [1, T], positions)`` and ``decode(tokens [1, 1], positions [1])`` sharing
  the cache; a ``prefill`` exported for one length ``T`` only takes prompts in chunks of
  exactly ``T`` (the rest goes through ``decode``).

``positions`` is the position of every token (``[T]``: transformers' ``cache_position``) or of
the first one (``[1]``: ExecuTorch's ``input_pos``), as the method declares it. The metadata
methods ExecuTorch's LLM runner reads are used when present (``llm.metadata``):
``get_max_context_len`` (cache positions; else ``get_max_seq_len``, as the runner does),
``get_max_seq_len`` (tokens per call), ``get_vocab_size``, ``get_bos_id``, ``get_eos_ids``,
``enable_dynamic_shape``. A program without them needs ``max_context_len`` given.

Each ``Session`` owns its state (``runtime.Program.new_state``: one tensor per mutable buffer)
and binds it for each of its calls, so any number of conversations share one loaded program;
see ``session.py``. Nothing here imports the exporter (``executorch.exir``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import torch

from executorch_trt import runtime
from executorch_trt.llm import metadata as names
from executorch_trt.llm.prefix_cache import PrefixCache
from executorch_trt.llm.session import Session
from executorch_trt.llm.session_file import read_session
from executorch_trt.llm.state_layout import StateLayout, StateProbe
from executorch_trt.runtime.tensors import TensorSpec

PathLike = Union[str, "os.PathLike[str]"]


class LLMProgram:
    """A loaded LLM program (module docstring); make one with ``load``.

    * ``program``: the ``runtime.Program``.
    * ``max_context_len``: KV cache positions, the most tokens a session holds.
    * ``max_seq_len``: the most tokens one call takes (a prompt is run in chunks of it).
    * ``vocab_size``; ``bos_id`` (``None`` when the program has none); ``eos_ids`` (a tuple,
      possibly empty): the metadata's, for ``generate(stop_tokens=...)``.
    * ``logits_width``: the last dimension of the decode method's logits (``vocab_size``
      without ``get_vocab_size``).
    * ``layout``: which buffers are positional (``StateLayout``).
    * ``prefill_method``/``decode_method``: the method names a session calls.
    """

    def __init__(
        self,
        program: runtime.Program,
        source: str | bytes,
        data: str | None = None,
        max_context_len: int | None = None,
    ) -> None:
        self.program = program
        self._source = source
        self._data = data
        self._fingerprint: dict[str, Any] | None = None
        self._fingerprint_lock = threading.Lock()
        self._prefix_cache: PrefixCache | None = None
        methods = program.method_names
        meta = _metadata(program)
        if "forward" in methods:
            self.prefill_method = self.decode_method = "forward"
        elif {"prefill", "decode"} <= methods:
            self.prefill_method, self.decode_method = "prefill", "decode"
        else:
            raise ValueError(
                f"llm.load: the program has methods {sorted(methods)}; an LLM program has "
                "forward(tokens, positions), or prefill and decode (export it with "
                "executorch_trt.llm.export_llm)"
            )
        if not program.buffer_names:
            raise ValueError(
                "llm.load: the program has no named mutable buffers, so a session cannot own "
                "its KV cache; export it with emit_mutable_buffer_names=True (the default of "
                "executorch_trt.export and export_llm)"
            )
        prefill_tokens, self.positions_are_start = self._check_signature(self.prefill_method)
        decode_tokens, _ = self._check_signature(self.decode_method)
        if decode_tokens != 1 and self.decode_method != "forward":
            raise ValueError(
                f"llm.load: decode takes {decode_tokens} tokens per call; a "
                "decode method takes one token ([1, 1])"
            )
        self.max_seq_len = int(meta.get(names.MAX_SEQ_LEN, prefill_tokens))
        if self.max_seq_len > prefill_tokens:
            raise ValueError(
                f"llm.load: get_max_seq_len says {self.max_seq_len} tokens per "
                f"call, but {self.prefill_method} takes at most {prefill_tokens}"
            )
        #: Whether the prefill method takes any length up to max_seq_len; None: not known yet
        #: (no enable_dynamic_shape metadata; the first shorter chunk tells).
        self.prefill_is_dynamic: bool | None = (
            bool(meta[names.ENABLE_DYNAMIC_SHAPE])
            if names.ENABLE_DYNAMIC_SHAPE in meta
            else (False if prefill_tokens == 1 else None)
        )
        if (
            self.prefill_method == "forward"
            and prefill_tokens > 1
            and self.prefill_is_dynamic is False
        ):
            raise ValueError(
                f"llm.load: forward takes exactly {prefill_tokens} tokens per call and there is "
                "no decode method, so no single token can be run; export forward with a "
                "dynamic length (torch.export.Dim) or add a decode method"
            )
        declared = meta.get(names.MAX_CONTEXT_LEN)
        if max_context_len is not None and declared and max_context_len != declared:
            # A wrong value can match another dimension of a buffer (a head size) and make it
            # look positional: refused rather than trusted.
            raise ValueError(
                f"llm.load: max_context_len={max_context_len} contradicts the program's "
                f"get_max_context_len ({declared}): leave it out or pass {declared}"
            )
        capacity = max_context_len or declared or meta.get(names.MAX_SEQ_LEN)
        if capacity is None:
            raise ValueError(
                "llm.load: the program has no get_max_context_len (nor get_max_seq_len) method "
                "saying how many positions its KV cache has; pass max_context_len="
            )
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"llm.load: max_context_len must be a positive int, got {capacity!r}")
        if capacity < 2:
            raise ValueError(
                f"llm.load: max_context_len={capacity}: a KV cache of fewer than 2 positions "
                "holds no conversation"
            )
        self.logits_width = self._logits_width()
        self.vocab_size = int(meta.get(names.VOCAB_SIZE) or self.logits_width)
        specs = {name: program.buffer_spec(name) for name in program.buffer_names}
        self.layout = self._probed_layout(specs, capacity)
        if not self.layout.positional:
            raise ValueError(
                f"llm.load: no buffer of the program has a dimension of {capacity} positions "
                f"(max_context_len) along which each token writes its own position's entries "
                f"(once, overwriting), so none is a KV cache; the buffers are "
                f"{ {n: list(s.shape) for n, s in specs.items()} }"
            )
        self.max_context_len = capacity
        #: The initial values of the positional buffers whose initial value is not all zero
        #: bytes (a rewind resets the dropped positions' entries to them; zeros otherwise).
        self.nonzero_initial: dict[str, torch.Tensor] = {}
        for name in self.layout.positional:
            initial = program.initial_value(name)
            if bool(initial.reshape(-1).view(torch.uint8).any()):
                self.nonzero_initial[name] = initial
        bos = meta.get(names.BOS_ID)
        self.bos_id: int | None = None if bos is None else int(bos)
        eos = meta.get(names.EOS_IDS, ())
        self.eos_ids: tuple[int, ...] = tuple(
            int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])
        )

    def _check_signature(self, method: str) -> tuple[int, bool]:
        """(most tokens per call, whether positions are the first token's only) of ``method``;
        ``ValueError`` naming the method unless it takes ``(int64 [1, T], int64 [T] or [1])``."""
        spec = self.program.load_method(method).metadata
        inputs = [s for s in spec.inputs if s is not None]
        if (
            len(spec.inputs) != 2
            or len(inputs) != 2
            or any(s.dtype != torch.int64 for s in inputs)
            or len(inputs[0].shape) != 2
            or inputs[0].shape[0] != 1
            or len(inputs[1].shape) != 1
        ):
            declared = ", ".join(str(s) for s in spec.inputs)
            raise ValueError(
                f"llm.load: {method} takes ({declared}); an LLM method takes tokens int64 "
                "[1, T] and positions int64 [T] (or [1]: the first token's)"
            )
        tokens = inputs[0].shape[1]
        positions = inputs[1].shape[0]
        if positions not in (tokens, 1):
            raise ValueError(
                f"llm.load: {method} takes {tokens} tokens but {positions} "
                "positions; positions are one per token, or the first token's"
            )
        return tokens, positions == 1 and tokens > 1

    def _probed_layout(self, specs: Mapping[str, TensorSpec], capacity: int) -> StateLayout:
        """The layout ``StateProbe`` finds (``state_layout`` module docstring): each buffer's
        role from the first token set that changes it, counters from the first set."""
        positional: dict[str, int] = {}
        counters: set[str] | None = None
        undecided = {n for n, spec in specs.items() if capacity in spec.shape}
        for ids in StateProbe.token_sets(self.vocab_size):
            probe = self._probe(specs, capacity, ids)
            if counters is None:
                counters = probe.counters()
            found = probe.positional()
            for name in undecided - probe.silent():
                if name in found:
                    positional[name] = found[name]
            undecided &= probe.silent()
            if not undecided:
                break
        return StateLayout.of(specs, capacity, positional, counters or ())

    def _probe(
        self, specs: Mapping[str, TensorSpec], capacity: int, ids: Sequence[int]
    ) -> StateProbe:
        """Runs ``ids`` at ``StateProbe.POSITIONS`` through the decode method on a fresh state
        and returns what they wrote. ``ValueError`` naming the method when it fails on them."""
        state = self.program.new_state()
        probe = StateProbe(specs, capacity)
        decode = self.program.load_method(self.decode_method)
        for token, position in zip(ids, StateProbe.POSITIONS):
            probe.prepare(state)
            inputs = [torch.tensor([[token]]), torch.tensor([position])]
            try:
                decode.execute(inputs, state=state)
            except RuntimeError as e:
                raise ValueError(
                    f"llm.load: {self.decode_method} failed on token {token} at position "
                    f"{position}, run on a fresh state to find the KV caches: {e}"
                ) from e
            probe.observe(state)
        return probe

    def _logits_width(self) -> int:
        outputs = self.program.load_method(self.decode_method).metadata.outputs
        if not outputs or outputs[0] is None or not outputs[0].shape:
            raise ValueError(f"llm.load: {self.decode_method}'s first output is not logits")
        return int(outputs[0].shape[-1])

    def new_session(self) -> Session:
        """A new, empty conversation with its own state (caches at their initial value)."""
        return Session(self)

    def load_session(self, path: PathLike) -> Session:
        """The conversation ``Session.save`` wrote to ``path``, restored bit for bit
        (``session_file``). Raises ``ValueError`` naming what differs or is damaged (another
        program, a truncated or corrupted file, a newer format version), ``FileNotFoundError``;
        nothing is loaded then."""
        return Session.restored(self, read_session(self, path))

    def prefix_cache(self, max_bytes: int) -> PrefixCache:
        """Makes new sessions' first ``prefill`` reuse the longest prompt prefix another
        session's prefill already ran (content-addressed by token ids), keeping at most
        ``max_bytes`` of cached state (least recently used evicted); returns the cache
        (``PrefixCache``: entries, bytes, hits). Calling it again replaces the cache; ``0``
        turns it off. ``ValueError`` for a negative ``max_bytes``."""
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"prefix_cache: max_bytes must be an int >= 0, got {max_bytes!r}")
        self._prefix_cache = PrefixCache(self.layout, max_bytes)
        return self._prefix_cache

    @property
    def fingerprint(self) -> dict[str, Any]:
        """What a saved session must match: the buffers (name, dtype, shape) and the BLAKE2b-256 of
        the program's bytes (and of its ``.ptd``, when it has one). Computed once."""
        with self._fingerprint_lock:
            if self._fingerprint is None:
                self._fingerprint = {
                    "buffers": [
                        [name, str(spec.dtype).replace("torch.", ""), list(spec.shape)]
                        for name, spec in self.layout.specs.items()
                    ],
                    "program_blake2b": _blake2b(self._source),
                    "data_blake2b": None if self._data is None else _blake2b(self._data),
                }
            return self._fingerprint


def _blake2b(source: str | bytes) -> str:
    digest = hashlib.blake2b(digest_size=32)
    if isinstance(source, bytes):
        digest.update(source)
    else:
        with open(source, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


_METADATA = (
    names.MAX_SEQ_LEN,
    names.MAX_CONTEXT_LEN,
    names.VOCAB_SIZE,
    names.BOS_ID,
    names.EOS_IDS,
    names.ENABLE_DYNAMIC_SHAPE,
    names.USE_KV_CACHE,
)


def _metadata(program: runtime.Program) -> dict[str, Any]:
    """``{name: value}`` of the LLM runner's metadata methods the program has."""
    found: dict[str, Any] = {}
    for name in _METADATA:
        if name in program.method_names:
            values: list[Any] = program.load_method(name).execute([])
            value: Any = values if name == names.EOS_IDS else values[0]
            if isinstance(value, torch.Tensor):
                value = value.tolist()
            found[name] = value
    return found


def load(
    program: PathLike | bytes, data: PathLike | None = None, *, max_context_len: int | None = None
) -> LLMProgram:
    """Loads an LLM program (module docstring): ``program`` a ``.pte`` path or its bytes,
    ``data`` its ``.ptd`` (weights kept outside the ``.pte``), ``max_context_len`` the KV cache
    positions when the program has no ``get_max_context_len`` method (refused when it has one
    that says otherwise).

    Raises as ``runtime.load`` for a file that does not load, ``ValueError`` naming what is
    missing for a program that is not an LLM program (no forward/prefill+decode, other input
    types, no named buffers, no cache of ``max_context_len`` positions)."""
    if isinstance(program, (bytes, bytearray, memoryview)):
        source: str | bytes = bytes(program)
    else:
        source = os.fsdecode(os.fspath(program))
    data_path = None if data is None else os.fsdecode(os.fspath(data))
    loaded = runtime.load(source if isinstance(source, bytes) else Path(source), data=data_path)
    return LLMProgram(loaded, source, data_path, max_context_len)
