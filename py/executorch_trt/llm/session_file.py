"""A conversation on disk: ``Session.save`` and ``LLMProgram.load_session``.

Layout (little-endian)::

    0   magic  b"ETRTSESS"
    8   version u32 (FORMAT_VERSION) | 12 reserved u32 (0) | 16 header_size u64
    24  header: UTF-8 JSON (below)
    ..  data: the tensors' bytes, at the header's offsets (relative to the data's start)
    end BLAKE2b-256 (32 bytes) of every byte before it

The header::

    {"format": "executorch_trt.session", "version": 1,
     "program": {"buffers": [[name, dtype, shape], ...], "program_blake2b": ...,
                 "data_blake2b": ...},
     "tokens": [ids held], "counters": [names],
     "tensors": [{"role": "buffer" | "snapshot" | "logits", "name": ..., "position": p (a
                  snapshot's), "dtype": ..., "shape": [stored shape], "offset": ...,
                  "nbytes": ...}],
     "data_size": bytes}

A positional buffer (a KV cache) is stored for the positions held only (its shape along the
position dimension is the number of tokens), the others whole; ``snapshot`` entries are the
session's saved values of its non-positional buffers (``session.py``), ``logits`` the last
token's. ``program`` is the fingerprint of the program it was saved from
(``LLMProgram.fingerprint``): the buffers, and the BLAKE2b-256 of the ``.pte`` and of its ``.ptd``.
BLAKE2b (RFC 7693, 32-byte digest: ``hashlib.blake2b(digest_size=32)``, libb2 in C++) is the
hash the delegate blob's checksum uses too, so C++ reads and writes the same files.

Writing is atomic (a temporary file in the same directory, then ``os.replace``): a crash leaves
the old file or the new one (a path that exists and is not a regular file is refused). Reading
checks, in this order, and raises ``ValueError`` naming the file and the problem before
anything is loaded: the size and magic, the version (a newer one is refused), the checksum
(truncated or corrupted), the header, the program's fingerprint (what differs), the token ids
(at most ``max_context_len``, inside the vocabulary), each tensor's dtype, shape and extent,
each snapshot (a non-positional buffer's, whole), the logits' width, and that each listed
token counter holds the token count. A file that passes the checksum is still checked: the
checksum finds damage, not a header written to lie.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import tempfile
from typing import TYPE_CHECKING, Any

import torch

from executorch_trt.format.wire import DTYPES, dtype_name
from executorch_trt.llm.state_layout import is_token_count

if TYPE_CHECKING:
    from executorch_trt.llm.program import LLMProgram, PathLike
    from executorch_trt.llm.session import Session

MAGIC = b"ETRTSESS"
FORMAT_VERSION = 1
FORMAT = "executorch_trt.session"
_HEADER = struct.Struct("<8sIIQ")
_DIGEST = 32


def _raw(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def write_session(session: Session, path: PathLike) -> None:
    """Writes ``session`` to ``path`` (module docstring); the caller holds its lock."""
    model = session.model
    layout = model.layout
    position = session.position
    blobs: list[bytes] = []
    tensors: list[dict[str, Any]] = []
    offset = 0

    def add(role: str, name: str, tensor: torch.Tensor, **extra: Any) -> None:
        nonlocal offset
        data = _raw(tensor)
        dtype = dtype_name(tensor.dtype)
        if dtype is None:
            raise ValueError(
                f"save: buffer {name!r} has dtype {tensor.dtype}, which a session file cannot hold"
            )
        tensors.append(
            dict(
                role=role,
                name=name,
                dtype=dtype,
                shape=list(tensor.shape),
                offset=offset,
                nbytes=len(data),
                **extra,
            )
        )
        blobs.append(data)
        offset += len(data)

    for name, tensor in session._live_state().items():
        add("buffer", name, layout.held(name, tensor, position))
    for p, snapshot in sorted(session._snapshots.items()):
        for name, tensor in snapshot.items():
            add("snapshot", name, tensor, position=p)
    if session._logits is not None:
        add("logits", "logits", session._logits)
    header = json.dumps(
        {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "program": model.fingerprint,
            "tokens": session._tokens,
            "counters": sorted(session._counters),
            "tensors": tensors,
            "data_size": offset,
        }
    ).encode("utf-8")
    digest = hashlib.blake2b(digest_size=_DIGEST)
    prefix = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(header)) + header
    digest.update(prefix)
    for blob in blobs:
        digest.update(blob)
    target = os.fspath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        # os.replace would replace a directory entry that is not a file (a device node).
        raise ValueError(f"save: {target!r} exists and is not a regular file")
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, temporary = tempfile.mkstemp(prefix=".session-", dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, f"save: cannot write {target!r} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(prefix)
            for blob in blobs:
                f.write(blob)
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _fingerprint_difference(saved: Any, current: dict[str, Any]) -> str | None:
    """What differs between the fingerprint a file was saved from and the program's."""
    if not isinstance(saved, dict):
        return "the file has no program fingerprint"
    listed = saved.get("buffers")
    if not isinstance(listed, list):
        return "the file's program fingerprint has no list of buffers"
    saved_buffers = {
        b[0]: b[1:] for b in listed if isinstance(b, list) and b and isinstance(b[0], str)
    }
    buffers = {b[0]: b[1:] for b in current["buffers"]}
    problems = []
    missing = sorted(set(buffers) - set(saved_buffers))
    extra = sorted(set(saved_buffers) - set(buffers))
    if missing:
        problems.append(f"the file has no buffer {missing}")
    if extra:
        problems.append(f"the file has buffers this program does not ({extra})")
    for name in sorted(set(buffers) & set(saved_buffers)):
        if [list(x) if isinstance(x, list) else x for x in saved_buffers[name]] != [
            list(x) if isinstance(x, list) else x for x in buffers[name]
        ]:
            problems.append(
                f"buffer {name!r} is {saved_buffers[name]} in the file and "
                f"{buffers[name]} in this program"
            )
    for key, what in (("program_blake2b", "the .pte"), ("data_blake2b", "the .ptd")):
        if saved.get(key) != current[key]:
            problems.append(
                f"{what} differs (BLAKE2b {str(saved.get(key))[:16]}... in the "
                f"file, {str(current[key])[:16]}... here)"
            )
    return "; ".join(problems) or None


@dataclasses.dataclass
class SavedSession:
    """What a session file holds, read and checked (``read_session``); the state is a whole
    new state of the program with the held part filled in."""

    tokens: list[int]
    state: dict[str, torch.Tensor]
    counters: list[str]
    snapshots: dict[int, dict[str, torch.Tensor]]
    logits: torch.Tensor | None


def read_session(model: LLMProgram, path: PathLike) -> SavedSession:
    """The session saved at ``path`` for ``model`` (module docstring for the checks)."""
    where = os.fspath(path)
    if os.path.exists(where) and not os.path.isfile(where):
        # A fifo would block the read, a device would not end.
        raise ValueError(f"load_session: {where}: not a regular file")
    with open(where, "rb") as f:
        data = f.read()

    def bad(problem: str) -> ValueError:
        return ValueError(f"load_session: {where}: {problem}")

    if len(data) < _HEADER.size + _DIGEST:
        raise bad(
            f"truncated: {len(data)} bytes, shorter than a session file's header and checksum"
        )
    magic, version, _, header_size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise bad(f"not a session file (magic {magic!r}, expected {MAGIC!r})")
    if version > FORMAT_VERSION:
        raise bad(
            f"written by a newer executorch_trt (session format version {version}); this "
            f"one reads version {FORMAT_VERSION}: upgrade it to load the file"
        )
    if version < 1:
        raise bad(f"session format version {version} is not a version")
    if hashlib.blake2b(data[:-_DIGEST], digest_size=_DIGEST).digest() != data[-_DIGEST:]:
        raise bad(
            f"truncated or corrupted ({len(data)} bytes; the BLAKE2b-256 at its end does not "
            "match its contents); save the session again"
        )
    if header_size > len(data) - _HEADER.size - _DIGEST:
        raise bad(f"its header says {header_size} bytes of JSON, the file has {len(data)} bytes")
    try:
        header = json.loads(data[_HEADER.size : _HEADER.size + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise bad(f"its header cannot be read ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise bad("its header cannot be read (not a JSON object)")
    tokens, counters = header.get("tokens"), header.get("counters")
    entries, data_size = header.get("tensors"), header.get("data_size")
    if (
        not isinstance(counters, list)
        or not all(isinstance(c, str) for c in counters)
        or not isinstance(entries, list)
        or type(data_size) is not int
        or data_size < 0
    ):
        raise bad(
            "its header cannot be read (it needs tokens, counters (names), tensors (a list) "
            "and data_size (an int))"
        )
    base = _HEADER.size + header_size
    if base + data_size + _DIGEST != len(data):
        raise bad(f"its header says {base + data_size + _DIGEST} bytes, the file has {len(data)}")
    difference = _fingerprint_difference(header.get("program"), model.fingerprint)
    if difference:
        raise bad(f"saved from another program: {difference}")
    if (
        not isinstance(tokens, list)
        or not all(type(t) is int for t in tokens)
        or len(tokens) > model.max_context_len
    ):
        raise bad("its token ids are not a list of at most max_context_len ints")
    # A held id outside the vocabulary would be run again by a rewind.
    for i, t in enumerate(tokens):
        if not 0 <= t < model.vocab_size:
            raise bad(f"token {i} is {t}, outside the vocabulary [0, {model.vocab_size})")
    position = len(tokens)
    state = model.program.new_state()
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    logits: torch.Tensor | None = None
    seen = set()
    for entry in entries:
        tensor, key = _tensor(entry, data, base, data_size, bad)
        role, name = key
        if role == "buffer":
            if name not in state:
                raise bad(f"buffer {name!r} is not this program's")
            target = model.layout.held(name, state[name], position)
            if tuple(target.shape) != tuple(tensor.shape) or target.dtype != tensor.dtype:
                raise bad(
                    f"buffer {name!r} is {tensor.dtype} {list(tensor.shape)}, "
                    f"{position} tokens need {target.dtype} {list(target.shape)}"
                )
            target.copy_(tensor)
            seen.add(name)
        elif role == "snapshot":
            p = entry.get("position")
            if not isinstance(p, int) or not 0 <= p <= position or name not in model.layout.other:
                raise bad(
                    f"snapshot of {name!r} at {p!r} is not a held position's value of a "
                    "buffer that is not positional"
                )
            want = state[name]
            if tuple(tensor.shape) != tuple(want.shape) or tensor.dtype != want.dtype:
                raise bad(
                    f"snapshot of {name!r} is {tensor.dtype} {list(tensor.shape)}, the buffer "
                    f"is {want.dtype} {list(want.shape)}"
                )
            snapshots.setdefault(p, {})[name] = tensor.clone()
        elif role == "logits":
            if tensor.dtype != torch.float32 or tuple(tensor.shape) != (model.logits_width,):
                raise bad(
                    f"its logits are {tensor.dtype} {list(tensor.shape)}, this program's are "
                    f"float32 [{model.logits_width}]"
                )
            logits = tensor.clone()
        else:
            raise bad(f"unknown tensor role {role!r}")
    if seen != set(state):
        raise bad(f"no data for buffer(s) {sorted(set(state) - seen)}")
    for name in counters:
        # A rewind sets a counter to the kept token count rather than restoring it.
        if name not in model.layout.counters or not is_token_count(state[name], position):
            raise bad(
                f"{name!r} is listed as a token counter but does not hold the token count "
                f"({position})"
            )
    for p, values in snapshots.items():
        missing = [n for n in model.layout.other if n not in values]
        if missing:
            raise bad(f"the snapshot at {p} has no value of buffer(s) {missing}")
    return SavedSession(list(tokens), state, list(counters), snapshots, logits)


def _tensor(
    entry: Any, data: bytes, base: int, data_size: int, bad: Any
) -> tuple[torch.Tensor, tuple[str, str]]:
    """One stored tensor (a copy), checked against its extent."""
    try:
        role, name, dtype_text = entry["role"], entry["name"], entry["dtype"]
        shape, offset, nbytes = list(entry["shape"]), entry["offset"], entry["nbytes"]
    except (KeyError, TypeError):
        raise bad(f"a tensor entry is malformed: {str(entry)[:200]}") from None
    if not all(isinstance(x, str) for x in (role, name, dtype_text)) or not all(
        type(x) is int for x in (*shape, offset, nbytes)
    ):
        raise bad(f"a tensor entry is malformed: {str(entry)[:200]}")
    dtype = DTYPES.get(dtype_text)
    if dtype is None:
        raise bad(f"tensor {name!r} has unknown dtype {dtype_text!r}")
    numel = 1
    for s in shape:
        if s < 0:
            raise bad(f"tensor {name!r} has a negative size in {shape}")
        numel *= s
    expected = numel * torch.empty((), dtype=dtype).element_size()
    if (
        not isinstance(offset, int)
        or not isinstance(nbytes, int)
        or nbytes != expected
        or offset < 0
        or offset + nbytes > data_size
    ):
        raise bad(
            f"tensor {name!r} ({dtype_text} {shape}) does not fit its extent "
            f"(offset {offset!r}, {nbytes!r} bytes, data {data_size} bytes)"
        )
    raw = bytearray(data[base + offset : base + offset + nbytes])
    try:
        if not raw:
            return torch.empty(shape, dtype=dtype), (role, name)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape), (role, name)
    except (RuntimeError, TypeError, OverflowError):  # sizes torch cannot hold, e.g. [2**62, 0]
        raise bad(f"tensor {name!r} has a shape torch cannot hold: {shape}") from None
