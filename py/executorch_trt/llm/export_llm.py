"""``export_llm``: a ``transformers`` causal LM -> a ``.pte`` in ExecuTorch's LLM conventions.

The program runs on ExecuTorch's own LLM runner (``TextLLMRunner``) as well as on
``executorch_trt.runtime``: ``forward(input_ids[1, T], cache_position[T])`` with a dynamic T
(or ``prefill``/``decode``, ``decoder_programs``), a static KV cache held as the program's
mutable buffers and updated in place by the delegate, and the runner's metadata methods
(``metadata``).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import torch

from executorch_trt.format.wire import EXTERNAL_WEIGHTS_TAG
from executorch_trt.inspection.inspect_program import inspect
from executorch_trt.llm.architectures import check_model
from executorch_trt.llm.checkpoint import load_causal_lm
from executorch_trt.llm.decoder_programs import export_decoder_methods
from executorch_trt.llm.metadata import llm_metadata
from executorch_trt.llm.quantization import DEFAULT_GROUP_SIZE
from executorch_trt.llm.quantization import quantize as quantize_linears
from executorch_trt.lowering.export import export
from executorch_trt.options import check_bool

if TYPE_CHECKING:
    from executorch.exir import ExecutorchProgramManager

PathLike = Union[str, "os.PathLike[str]"]


def check_lengths(config: Any, max_seq_len: Any, max_context_len: Any) -> None:
    """Raises ``TypeError`` for a length that is not an int and ``ValueError`` unless
    ``2 <= max_seq_len <= max_context_len <= max_position_embeddings`` of ``config`` (a
    transformers config; its text config is read)."""
    for name, value in (("max_seq_len", max_seq_len), ("max_context_len", max_context_len)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"export_llm: {name} must be an int, got {type(value).__name__} {value!r}"
            )
    if max_seq_len < 2:
        raise ValueError(
            f"export_llm: max_seq_len must be at least 2 (the most tokens one call "
            f"takes; the runner's T = 1 steps are part of the range), got "
            f"{max_seq_len}"
        )
    if max_context_len < max_seq_len:
        raise ValueError(
            f"export_llm: max_context_len ({max_context_len}, the cache's "
            f"positions) must be at least max_seq_len ({max_seq_len})"
        )
    positions = getattr(config.get_text_config(), "max_position_embeddings", None)
    if isinstance(positions, int) and max_context_len > positions:
        raise ValueError(
            f"export_llm: max_context_len {max_context_len} is beyond the model's "
            f"max_position_embeddings {positions}; pass at most {positions}"
        )


def _check_dtype(model: Any, dtype: torch.dtype) -> None:
    if model.dtype != dtype:
        raise ValueError(
            f"export_llm: the model is {model.dtype}, not dtype={dtype}; pass "
            f"dtype={model.dtype} or convert the model first (model.to({dtype}))"
        )


def _write(
    program: Any,
    output: PathLike | None,
    data: PathLike | None,
    progress: Callable[[str], None],
) -> None:
    if output is not None:
        with open(output, "wb") as f:
            f.write(program.buffer)
        progress(f"wrote {os.fspath(output)} ({len(program.buffer)} bytes)")
    if data is not None:
        with tempfile.TemporaryDirectory() as tmp:
            program.write_tensor_data_to_file(tmp)  # writes <EXTERNAL_WEIGHTS_TAG>.ptd
            written = os.path.join(tmp, f"{EXTERNAL_WEIGHTS_TAG}.ptd")
            size = os.path.getsize(written)
            shutil.move(written, os.fspath(data))
        progress(f"wrote {os.fspath(data)} ({size} bytes of weights)")


def export_llm(
    model_or_dir: Any,
    max_seq_len: int,
    *,
    output: PathLike | None = None,
    data: PathLike | None = None,
    prefill_decode: bool = False,
    engine: str = "portable",
    dtype: torch.dtype = torch.float32,
    max_context_len: int | None = None,
    quantize: str | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
    embedding_quantize: str | None = None,
    generate_full_logits: bool = False,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> ExecutorchProgramManager:
    """Exports a causal LM as an ExecuTorch LLM program through the TensorRT delegate.

    Args:
        model_or_dir: a ``transformers`` causal LM instance of a supported architecture
            (``SUPPORTED_ARCHITECTURES``), or the path of a local checkpoint directory
            (``config.json`` + ``*.safetensors``, what ``save_pretrained`` writes), loaded
            offline with ``AutoModelForCausalLM.from_pretrained``. An instance is not changed.
        max_seq_len: the most tokens one call takes (``get_max_seq_len``; the dynamic T is
            ``Dim("T", min=1, max=max_seq_len)``), at least 2.
        output: where to write the ``.pte`` (optional; the result's ``.buffer`` is the same).
        data: where to write the external weights (``.ptd``): the weights then stay out of the
            ``.pte`` (``external_weights=True``); load with ``TextLLMRunner(pte, tokenizer,
            data)`` or ``executorch_trt.runtime.load(pte, data=...)``.
        prefill_decode: methods ``prefill`` (T in ``[1, max_seq_len]``) and ``decode`` (T = 1)
            sharing the cache, instead of one ``forward``. For runtimes that share planned
            memory between methods (``executorch_trt.llm``, ``executorch.runtime``), not
            ExecuTorch 1.5.1's ``TextLLMRunner`` (docs/guide/llm.md).
        engine: ``"portable"`` (nested ExecuTorch program on the CPU) or ``"tensorrt"``.
        dtype: the dtype a directory's weights are loaded in; an instance must already have it.
        max_context_len: positions in the KV cache (``get_max_context_len``), at least
            ``max_seq_len`` and at most the model's ``max_position_embeddings``; default
            ``max_seq_len``.
        quantize: ``"8da4w"`` or ``"8da8w"``: the linears' weights quantized as ExecuTorch's
            LLM recipe does (``quantization.quantize``; int8 dynamic activations, int4/int8
            weights in groups of ``group_size`` input channels), run by the portable engine's
            nested XNNPACK; a float32 model only. An instance is quantized on a copy.
        group_size: input channels per weight scale with ``quantize`` (default 32; 0: one per
            output channel); linears whose ``in_features`` it does not divide stay float.
        embedding_quantize: with ``quantize``, ``"int8"`` (one scale per row) or ``"int4"``
            (one per ``group_size`` columns): the embedding table weight-only quantized, as the
            recipe's ``--embedding-quantize 8,0`` / ``4,32``, run by ExecuTorch's quantized
            embedding kernels in the nested program; ``None`` keeps it float.
        generate_full_logits: the methods return every token's logits ``[1, T, vocab]``;
            by default only the last token's ``[1, 1, vocab]``, the one a runner samples from,
            and the LM head reads one hidden state per call (ExecuTorch's LLM recipe's option
            and default; ``TextLLMRunner`` takes the last row of either).
        progress: called with one line per stage (load, export, lower, write).
        **options: further ``executorch_trt.export`` options; ``require_inplace`` defaults to
            True here, so a cache update that would be copied back fails the export.

    The methods: ``forward(input_ids[1, T] int64, cache_position[T] int64) -> logits[1, 1,
    vocab]`` (``[1, T, vocab]`` with ``generate_full_logits``; the positions of the T tokens,
    ``start..start+T-1``), or ``prefill`` with that
    signature and ``decode(input_ids[1, 1], cache_position[1])``; and the constant methods
    ``get_max_seq_len``, ``get_max_context_len``, ``get_vocab_size``, ``use_kv_cache``,
    ``enable_dynamic_shape`` (ints/bools), ``get_bos_id`` (int) and ``get_eos_ids`` (list of
    ints) when the model's config has them. The cache (``key_cache_{i}``, ``value_cache_{i}``
    per layer, zeroed at load) persists across calls of one loaded program; a runner's
    ``reset()`` starts again at position 0 (entries past the current position are masked).

    Returns the ``ExecutorchProgramManager``. Raises ``CheckpointError`` (a ``ValueError``:
    missing directory, no ``config.json``, no safetensors, weights that do not load),
    ``UnsupportedArchitectureError`` (a ``ValueError`` naming the architecture and the
    supported ones), ``TypeError`` for a value that is not a transformers model or a path, or
    a flag that is not ``True``/``False``, and ``ValueError`` for lengths out of range, a model
    not in ``dtype``, or a quantization it cannot apply (``quantization.quantize``); export
    errors of ``executorch_trt.export`` (``NotInPlaceError`` for a cache update that would be
    copied).
    """
    say = progress or (lambda line: None)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"export_llm: dtype must be a torch.dtype (e.g. torch.float32), got {dtype!r}"
        )
    check_bool("export_llm: prefill_decode", prefill_decode)
    check_bool("export_llm: generate_full_logits", generate_full_logits)
    if "external_weights" in options:
        raise TypeError(
            "export_llm: pass data=path.ptd to keep the weights out of the .pte, "
            "not external_weights"
        )
    if isinstance(model_or_dir, (str, os.PathLike)):
        model_dir = os.fspath(model_or_dir)
        say(f"loading {model_dir} ({dtype}, offline)")
        model = load_causal_lm(model_dir, dtype)
    else:
        model = model_or_dir
    name = check_model(model)
    if model_or_dir is model:
        _check_dtype(model, dtype)
    max_context_len = max_seq_len if max_context_len is None else max_context_len
    check_lengths(model.config, max_seq_len, max_context_len)
    if embedding_quantize is not None and quantize is None:
        raise ValueError("export_llm: embedding_quantize needs quantize (e.g. quantize='8da4w')")
    if quantize is not None:
        if model is model_or_dir:
            model = copy.deepcopy(model)
        names = quantize_linears(model, quantize, group_size, embedding_quantize)
        modules = dict(model.named_modules())
        tables = [n for n in names if isinstance(modules[n], torch.nn.Embedding)]
        line = f"quantized {len(names) - len(tables)} linears ({quantize}, group size {group_size})"
        if tables:
            line += f" and {len(tables)} embedding table ({embedding_quantize})"
        say(line)
    layout = "prefill + decode" if prefill_decode else "forward"
    say(
        f"exporting {name} with torch.export: {layout}, T in [1, {max_seq_len}], cache of "
        f"{max_context_len} positions"
    )
    methods = export_decoder_methods(
        model,
        max_seq_len,
        max_context_len,
        prefill_decode,
        generate_full_logits=generate_full_logits,
    )
    say(f"lowering to the TensorRT delegate (engine {engine})")
    options.setdefault("require_inplace", True)
    program = export(
        methods,
        engine=engine,
        external_weights=data is not None,
        constant_methods=llm_metadata(model, max_seq_len, max_context_len),
        **options,
    )
    say(f"program: {inspect(program).summary.engine_summary}")
    _write(program, output, data, say)
    return program
