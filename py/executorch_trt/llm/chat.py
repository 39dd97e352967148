"""The ``chat`` command: a conversation with an LLM program, streamed as text.

    ./bazelw run //:chat -- --model model.pte --tokenizer tokenizer.json [--prompt TEXT] \\
        [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] \\
        [--session FILE] [--data model.ptd] [--max-context-len N] [--prefix-cache-bytes N]

With ``--prompt`` it answers that one turn; without it, every line of standard input is a turn
of one conversation. The answer streams to standard output; after each turn standard error
gets the turn's statistics: prompt tokens, tokens reused from the prefix cache, time to first
token (the prompt's prefill, whose logits give the first new token), prefill tok/s, generated
tokens, decode tok/s, and the tokens the session holds. The first line on standard error names
the engine the program's delegates run on.

``--session FILE`` makes the conversation survive a restart: it is loaded from FILE when FILE
exists (and refused, exit 2, when FILE is from another program or damaged) and saved to FILE
after every turn. The tokenizer is a Hugging Face ``tokenizer.json`` (the ``tokenizers``
library) or any file ExecuTorch's ``pytorch_tokenizers`` reads (tiktoken, SentencePiece,
llama2.c). A new conversation starts with the program's BOS token (``get_bos_id``) when it
has one; generation stops at its EOS tokens (``get_eos_ids``) or after ``--max-new-tokens``.

Exit status: 0 on success; 2 on bad usage or a bad input, named in the message (a missing
flag or file, a tokenizer or program that does not load, a refused session file); 1 when
running the program fails.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from absl import flags

from executorch_trt.llm.command_line import UsageError, parse, resolve, value

if TYPE_CHECKING:
    from executorch_trt.llm.session import Session

USAGE = (
    "usage: ./bazelw run //:chat -- --model model.pte --tokenizer tokenizer.json "
    "[--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] "
    "[--seed S] [--session FILE] [--data model.ptd] [--max-context-len N] "
    "[--prefix-cache-bytes N]"
)


def _define_flags() -> flags.FlagValues:
    fv = flags.FlagValues()
    flags.DEFINE_string("model", None, "the program (.pte)", flag_values=fv)
    flags.DEFINE_string(
        "tokenizer",
        None,
        "tokenizer.json, or a tiktoken/SentencePiece/llama2.c tokenizer file",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "data", None, "the program's .ptd (weights outside the .pte)", flag_values=fv
    )
    flags.DEFINE_string(
        "prompt", None, "one turn; without it each line of stdin is a turn", flag_values=fv
    )
    flags.DEFINE_integer(
        "max-new-tokens", 64, "most tokens generated per turn", lower_bound=0, flag_values=fv
    )
    flags.DEFINE_float("temperature", 0.0, "0 is greedy", lower_bound=0.0, flag_values=fv)
    flags.DEFINE_integer(
        "top-k", 0, "sample among the k most likely (0: all)", lower_bound=0, flag_values=fv
    )
    flags.DEFINE_float(
        "top-p",
        1.0,
        "sample in the smallest set with this probability",
        lower_bound=0.0,
        upper_bound=1.0,
        flag_values=fv,
    )
    flags.DEFINE_integer("seed", None, "seed of the sampling", flag_values=fv)
    flags.DEFINE_string(
        "session",
        None,
        "load the conversation from this file when it exists, save it there after every turn",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max-context-len",
        None,
        "KV cache positions, for a program without get_max_context_len",
        lower_bound=1,
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "prefix-cache-bytes",
        0,
        "a prefix cache of this many bytes for a new conversation's first prefill; one chat "
        "process holds one conversation, so it reuses nothing across runs (0: off)",
        lower_bound=0,
        flag_values=fv,
    )
    flags.DEFINE_boolean("help", False, "show this help", flag_values=fv)
    return fv


class Tokenizer:
    """``encode(text) -> ids`` and ``decode(ids) -> text`` over one of the supported files;
    ``vocab_size``: the ids it knows are ``[0, vocab_size)``, added tokens included."""

    def __init__(self, path: str) -> None:
        self.path = path
        if path.endswith(".json"):
            import tokenizers

            hf = tokenizers.Tokenizer.from_file(path)
            self.vocab_size: int = hf.get_vocab_size(with_added_tokens=True)
            self._encode: Callable[[str], list[int]] = lambda text: (
                hf.encode(text, add_special_tokens=False).ids
            )
            self._decode: Callable[[list[int]], str] = lambda ids: hf.decode(
                ids, skip_special_tokens=True
            )
            return
        import pytorch_tokenizers as P

        errors = []
        for kind in (P.CppTiktoken, P.CppSPTokenizer, P.CppLlama2cTokenizer):
            tokenizer = kind()
            try:
                tokenizer.load(path)
            except Exception as exc:  # noqa: BLE001 - each loader raises its own error
                errors.append(f"{kind.__name__}: {str(exc).strip().splitlines()[0]}")
                continue
            self._encode, self._decode = _pytorch_tokenizer_calls(tokenizer)
            if kind is P.CppSPTokenizer:
                self._decode = _sentencepiece_decode(path)
            self.vocab_size = int(tokenizer.vocab_size())
            return
        raise UsageError(
            f"--tokenizer {path}: not a tokenizer.json, and no pytorch_tokenizers "
            f"loader reads it ({'; '.join(errors)})"
        )

    def encode(self, text: str) -> list[int]:
        return list(self._encode(text))

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids) if ids else ""


def _pytorch_tokenizer_calls(
    tokenizer: Any,
) -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    """``(encode, decode)`` over a loaded ``pytorch_tokenizers`` tokenizer (no BOS or EOS added).
    ``decode`` joins the tokens' bytes and decodes them as UTF-8 (U+FFFD where they are not): a
    byte-level token may hold part of a character, which the binding's ``decode(token)`` cannot
    return as ``str`` (its ``UnicodeDecodeError`` carries the bytes)."""

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, 0, 0))

    def token_bytes(token: int) -> bytes:
        try:
            return str(tokenizer.decode(token)).encode("utf-8")
        except UnicodeDecodeError as exc:
            return bytes(exc.object)

    def decode(ids: list[int]) -> str:
        return b"".join(token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    return encode, decode


def _sentencepiece_decode(path: str) -> Callable[[list[int]], str]:
    """SentencePiece's own ``decode`` of model ``path``: pytorch_tokenizers' per-token decode
    writes byte-fallback pieces as "<0xC3>" and keeps the leading space of a word's first
    piece; this one joins the bytes and drops that space, as the model's text has them."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=path)
    return lambda ids: str(processor.decode(ids))


def _complete(text: str) -> str:
    """``text`` without its trailing U+FFFD characters: while a turn is generated, a character
    whose bytes span several tokens decodes to U+FFFD until its last byte arrives."""
    return text.rstrip("\ufffd")


def _parse(argv: list[str]) -> flags.FlagValues:
    fv = parse(_define_flags(), argv, ("model", "tokenizer"))
    for name in ("model", "tokenizer", "data"):
        given = value(fv, name)
        if given is not None and not value(fv, "help") and not os.path.isfile(resolve(given)):
            raise UsageError(f"--{name} {given}: no such file")
    return fv


def _turn(
    session: Session,
    tokenizer: Tokenizer,
    text: str,
    fv: flags.FlagValues,
    out: TextIO,
    err: TextIO,
) -> None:
    model = session.model
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # bytes Python kept undecoded (surrogate escapes)
        raise ValueError(
            f"the turn is not UTF-8 text (byte {exc.object[exc.start]!r} at character "
            f"{exc.start} does not decode); give the prompt as UTF-8"
        ) from None
    ids = tokenizer.encode(text)
    if session.position == 0 and model.bos_id is not None:
        ids = [model.bos_id, *ids]
    if not ids:
        return
    start = time.perf_counter()
    session.prefill(ids)
    prefill_s = time.perf_counter() - start
    reused = session.reused_tokens
    generated: list[int] = []
    shown = ""
    start = time.perf_counter()
    for token in session.generate(
        value(fv, "max-new-tokens"),
        value(fv, "temperature"),
        value(fv, "top-k"),
        value(fv, "top-p"),
        value(fv, "seed"),
        stop_tokens=model.eos_ids,
    ):
        if token >= tokenizer.vocab_size:
            raise ValueError(
                f"the model generated token {token}, outside the vocabulary of --tokenizer "
                f"{tokenizer.path} ({tokenizer.vocab_size} tokens); give the tokenizer the "
                "model was trained with"
            )
        generated.append(token)
        text_so_far = _complete(tokenizer.decode([t for t in generated if t not in model.eos_ids]))
        if text_so_far.startswith(shown):
            out.write(text_so_far[len(shown) :])
            out.flush()
            shown = text_so_far
    decode_s = time.perf_counter() - start
    text = tokenizer.decode([t for t in generated if t not in model.eos_ids])
    common = os.path.commonprefix([text, shown])  # noqa: RUF071 - two texts, not paths
    out.write(text[len(common) :] + "\n")
    out.flush()
    if common != shown:  # a decoder that cleans up earlier text (e.g. WordPiece's " ." -> ".")
        err.write(f"chat: the tokenizer changed text already written; the turn reads {text!r}\n")
    ran = len(ids) - reused
    err.write(
        f"chat: prompt {len(ids)} tokens ({reused} reused from the prefix cache), time to first "
        f"token {prefill_s * 1e3:.1f} ms, prefill {ran / prefill_s if ran else 0.0:.1f} tok/s, "
        f"generated {len(generated)} tokens, decode "
        f"{len(generated) / decode_s if generated else 0.0:.1f} tok/s; the session holds "
        f"{session.position} of {model.max_context_len} positions\n"
    )
    if session.position == model.max_context_len and len(generated) < value(fv, "max-new-tokens"):
        err.write("chat: stopped early: the cache is full; start a new conversation\n")
    err.flush()


def main(
    argv: list[str] | None = None,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    argv = sys.argv if argv is None else argv
    try:
        fv = _parse(argv)
    except UsageError as exc:
        err.write(f"chat: {exc}\n{USAGE}\n")
        return 2
    if value(fv, "help"):
        out.write(
            __doc__.strip() + "\n\nflags:\n" + fv.get_help(include_special_flags=False) + "\n"
        )
        return 0

    from executorch_trt import llm

    session_path = resolve(value(fv, "session")) if value(fv, "session") else None
    try:
        tokenizer = Tokenizer(resolve(value(fv, "tokenizer")))
        model = llm.load(
            resolve(value(fv, "model")),
            resolve(value(fv, "data")) if value(fv, "data") else None,
            max_context_len=value(fv, "max-context-len"),
        )
        if value(fv, "prefix-cache-bytes"):
            model.prefix_cache(value(fv, "prefix-cache-bytes"))
        if session_path is not None and os.path.exists(session_path):
            session = model.load_session(session_path)
            resumed = f", resumed {session.position} tokens from {session_path}"
        else:
            session = model.new_session()
            resumed = ""
    except (UsageError, ValueError, OSError, RuntimeError) as exc:
        err.write(f"chat: {exc}\n")
        return 2
    err.write(
        f"chat: {value(fv, 'model')}: {_engine_summary(resolve(value(fv, 'model')))}{resumed}\n"
    )
    turns = [value(fv, "prompt")] if value(fv, "prompt") is not None else None
    try:
        if turns is None:
            for line in stdin:
                _turn(session, tokenizer, line.rstrip("\n"), fv, out, err)
                if session_path is not None:
                    session.save(session_path)
        else:
            _turn(session, tokenizer, turns[0], fv, out, err)
            if session_path is not None:
                session.save(session_path)
    except ValueError as exc:  # e.g. the conversation no longer fits the cache
        err.write(f"chat: {exc}\n")
        return 2
    except Exception as exc:  # noqa: BLE001 - the program failed: say why, exit 1
        err.write(f"chat: failed: {type(exc).__name__}: {exc}\n")
        return 1
    return 0


def _engine_summary(path: str) -> str:
    """Which engine runs the program's delegates, read off the program (``inspect``)."""
    from executorch_trt.inspection import inspect

    return inspect(path).summary.engine_summary


if __name__ == "__main__":
    sys.exit(main())
