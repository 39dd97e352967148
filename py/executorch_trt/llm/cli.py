"""The ``export_llm`` command: a local ``transformers`` checkpoint -> an ExecuTorch LLM ``.pte``.

    ./bazelw run //:export_llm -- --model-dir DIR --max-seq-len N --output model.pte \\
        [--data model.ptd] [--prefill-decode] [--max-context-len N] [--engine portable] \\
        [--dtype float32] [--quantize 8da4w|8da8w] [--group-size 32]
        [--embedding-quantize int8|int4] [--generate-full-logits]

Prints one progress line per stage (load, export, lower, write) and the engine the program's
delegates use. Exit status: 0 on success; 2 on bad usage or a bad input, named in the message
(a flag missing or out of range, a missing model directory, no config.json, an unsupported
architecture with the supported list, no safetensors weights, an output directory that does
not exist); 1 when the export itself fails (the error is printed). Relative paths are relative
to the directory ``bazel run`` was started in.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from executorch_trt.llm.command_line import UsageError, parse, resolve, value
from executorch_trt.llm.quantization import (
    DEFAULT_GROUP_SIZE,
    EMBEDDING_SCHEMES,
    SCHEMES,
    check_scheme,
)

USAGE = (
    "usage: ./bazelw run //:export_llm -- --model-dir DIR --max-seq-len N --output "
    "model.pte [--data model.ptd] [--prefill-decode] [--max-context-len N] "
    "[--engine portable|tensorrt] [--dtype float32|bfloat16|float16] "
    "[--quantize 8da4w|8da8w] [--group-size N] [--embedding-quantize int8|int4] "
    "[--generate-full-logits]"
)

_DTYPES = ("float32", "bfloat16", "float16")


def _define_flags() -> flags.FlagValues:
    fv = flags.FlagValues()
    flags.DEFINE_string(
        "model-dir",
        None,
        "checkpoint directory (config.json + *.safetensors, "
        "as save_pretrained writes it); read offline",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max-seq-len",
        None,
        "most tokens per call (get_max_seq_len), >= 2",
        lower_bound=2,
        flag_values=fv,
    )
    flags.DEFINE_string("output", None, "the .pte to write", flag_values=fv)
    flags.DEFINE_string(
        "data", None, "write the weights to this .ptd instead of into the .pte", flag_values=fv
    )
    flags.DEFINE_boolean(
        "prefill-decode",
        False,
        "methods prefill and decode sharing the cache, instead of one forward (for "
        "executorch_trt.llm and //:chat; ExecuTorch 1.5.1's TextLLMRunner does not share "
        "the cache between methods)",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max-context-len",
        None,
        "KV cache positions (get_max_context_len); default --max-seq-len",
        lower_bound=2,
        flag_values=fv,
    )
    flags.DEFINE_enum(
        "engine", "portable", ["portable", "tensorrt"], "the delegate's engine", flag_values=fv
    )
    flags.DEFINE_enum(
        "dtype", "float32", list(_DTYPES), "dtype the weights are loaded in", flag_values=fv
    )
    flags.DEFINE_enum(
        "quantize",
        None,
        list(SCHEMES),
        "quantize the linears as ExecuTorch's LLM recipe does (int8 dynamic activations, "
        "int4/int8 grouped weights; float32 only)",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "group-size",
        DEFAULT_GROUP_SIZE,
        "input channels per weight scale with --quantize 8da4w: 0 (per output channel) or a "
        "power of two >= 32; 8da8w takes 0 only",
        lower_bound=0,
        flag_values=fv,
    )
    flags.DEFINE_enum(
        "embedding-quantize",
        None,
        list(EMBEDDING_SCHEMES),
        "with --quantize, the embedding table weight-only: int8 (a scale per row) or int4 "
        "(a scale per --group-size columns)",
        flag_values=fv,
    )
    flags.DEFINE_boolean(
        "generate-full-logits",
        False,
        "the methods return every token's logits [1, T, vocab], not only the last token's",
        flag_values=fv,
    )
    flags.DEFINE_boolean("help", False, "show this help", flag_values=fv)
    return fv


def _check_output(flag: str, path: str) -> None:
    parent = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise UsageError(f"--{flag} {path} is a directory; give a file path")
    if not os.path.isdir(parent):
        raise UsageError(f"--{flag} {path}: directory {parent} does not exist")


def _error(exc: BaseException) -> str:
    """``exc``'s message under one ``export_llm:`` prefix (the library's own messages have it)."""
    text = str(exc)
    return text if text.startswith("export_llm: ") else f"export_llm: {text}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv if argv is None else argv
    try:
        fv = parse(_define_flags(), argv, ("model-dir", "max-seq-len", "output"))
    except UsageError as exc:
        print(f"{_error(exc)}\n{USAGE}", file=sys.stderr)
        return 2
    if fv["help"].value:
        print(__doc__.strip() + "\n\nflags:\n" + fv.main_module_help())
        return 0

    from executorch_trt.llm.architectures import UnsupportedArchitectureError
    from executorch_trt.llm.checkpoint import CheckpointError, read_config
    from executorch_trt.llm.export_llm import check_lengths, export_llm

    model_dir = resolve(value(fv, "model-dir"))
    output = resolve(value(fv, "output"))
    data = resolve(fv["data"].value) if fv["data"].value else None
    try:
        _check_output("output", output)
        if data is not None:
            _check_output("data", data)
            if data == output:
                raise UsageError("--data and --output name the same file")
        # The directory, config.json, architecture and lengths, before the weights are read.
        config = read_config(model_dir)
        max_seq_len = value(fv, "max-seq-len")
        max_context_len = fv["max-context-len"].value or max_seq_len
        check_lengths(config, max_seq_len, max_context_len)
        quantize = fv["quantize"].value
        embedding_quantize = fv["embedding-quantize"].value
        if embedding_quantize is not None and quantize is None:
            raise UsageError("--embedding-quantize needs --quantize")
        if quantize is not None:
            check_scheme(quantize, value(fv, "group-size"), embedding_quantize)
            if value(fv, "dtype") != "float32":
                raise UsageError(f"--quantize {quantize} needs --dtype float32")
    except (UsageError, CheckpointError, UnsupportedArchitectureError, ValueError) as exc:
        print(f"{_error(exc)}\n{USAGE}", file=sys.stderr)
        return 2

    import torch

    def progress(line: str) -> None:
        print(f"export_llm: {line}", flush=True)

    try:
        export_llm(
            model_dir,
            max_seq_len,
            output=output,
            data=data,
            prefill_decode=value(fv, "prefill-decode"),
            engine=value(fv, "engine"),
            dtype=getattr(torch, value(fv, "dtype")),
            max_context_len=max_context_len,
            quantize=quantize,
            group_size=value(fv, "group-size"),
            embedding_quantize=embedding_quantize,
            generate_full_logits=value(fv, "generate-full-logits"),
            progress=progress,
        )
    except CheckpointError as exc:  # the weights themselves (no safetensors, do not load)
        print(_error(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001  (the export failed: say why, exit 1)
        print(f"export_llm: export failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
