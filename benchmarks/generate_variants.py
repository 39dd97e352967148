"""The variants the generation benchmark compares: how each one's program is exported and how
its prefill and decode are called.

* `eager`: the transformers model in PyTorch, static cache (transformers' export wrapper,
  `executorch_trt.llm.decoder_programs.exportable_module`, run as a module).
* `delegate_inplace`: `prefill(input_ids[1, T], cache_position[T])` (T dynamic, up to the
  longest prefill) and `decode(input_ids[1, 1], cache_position[1])` exported from that wrapper
  (`decoder_programs.export_decoder_methods`), lowered by `variants.build_delegate` (the
  delegate, `kv_cache="inplace"`, the portable engine's nested XNNPACK program).
* `delegate_external`: `delegate_inplace` with `external_weights=True`: the weights in
  `model.ptd` beside the `.pte` (`program_path`), loaded with `runtime.load(pte, data=ptd)`.
* `executorch_xnnpack`: the same two methods, plain ExecuTorch + `XnnpackPartitioner`
  (`variants.build_plain`).
* `executorch_llm_recipe`: ExecuTorch's CPU LLM recipe (`llm_recipe.py`): one
  `forward(tokens[1, T], input_pos[1])`, `llama::custom_sdpa` / `llama::update_cache`, XNNPACK
  with extended ops, weights converted from the same seeded model.
* `delegate_8da4w`, `executorch_llm_recipe_8da4w`: the same two with the linears quantized
  8da4w (int8 dynamic activations, int4 weights in groups of `QUANT_GROUP_SIZE`) and the
  embedding table int8 with a scale per row: the delegate through `executorch_trt.llm.quantize`
  (`embedding="int8"`), the recipe through its own `quantization.qmode` and
  `embedding_quantize="8,0"` (linears: torchao `quantize_` with HQQ scales in both; tables:
  `quantized_decomposed::embedding_byte` in both programs).

Every call returns the logits of the call's last position ([vocab] float32): that is what the
next greedy token is read from.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

import torch

from benchmarks import llm_recipe
from benchmarks.generate_config import GenerateConfig

VARIANTS: dict[str, str] = {
    "eager": "eager PyTorch, transformers StaticCache",
    "delegate_inplace": "executorch-trt delegate, prefill/decode, kv_cache=inplace",
    "delegate_external": "delegate_inplace, weights in model.ptd (external_weights=True)",
    "executorch_xnnpack": "plain ExecuTorch + XnnpackPartitioner, prefill/decode",
    "executorch_llm_recipe": "ExecuTorch's CPU LLM recipe (export_llama, custom_sdpa, XNNPACK)",
    "delegate_8da4w": "delegate_inplace, 8da4w linears, int8 table (executorch_trt.llm.quantize)",
    "executorch_llm_recipe_8da4w": "executorch_llm_recipe, qmode 8da4w, embedding_quantize 8,0",
}
#: Variants whose program is a two-method prefill/decode export of the transformers wrapper.
PREFILL_DECODE = ("delegate_inplace", "delegate_external", "executorch_xnnpack", "delegate_8da4w")
DELEGATES = ("delegate_inplace", "delegate_external", "delegate_8da4w")
#: Delegate variants whose weights are in a `.ptd` beside the `.pte` (`program_path`).
EXTERNAL = ("delegate_external",)
RECIPES = ("executorch_llm_recipe", "executorch_llm_recipe_8da4w")
RECIPE = "executorch_llm_recipe"
EAGER = "eager"
#: Variants whose linears are quantized 8da4w: their logits follow eager's only within the
#: quantization error, and their roofline (float32 weight bytes) does not apply.
QUANTIZED = ("delegate_8da4w", "executorch_llm_recipe_8da4w")
#: 8da4w's group size: 32 divides every linear's in_features of both models (the recipe's
#: default, 128, divides neither 576 nor 1536).
QUANT_GROUP_SIZE = 32


@dataclasses.dataclass
class Runner:
    """A loaded variant: `prefill(ids[1, T] int64, start) -> logits[vocab]` writes positions
    start..start+T-1; `decode(token, position) -> logits[vocab]` writes one position."""

    prefill: Callable[[torch.Tensor, int], torch.Tensor]
    decode: Callable[[int, int], torch.Tensor]


def _methods(config: GenerateConfig, model):
    from executorch_trt.llm.decoder_programs import export_decoder_methods

    return export_decoder_methods(
        model, config.max_tokens_per_call(), config.max_seq_len, prefill_decode=True
    )


def engine_of(path: str, method: str) -> tuple[str, str]:
    """(short label, description) of what runs `method` of the program at `path`, read off it
    (as `variants.decode_engine` reads a program manager)."""
    import executorch_trt
    from executorch_trt.format.wire import BACKEND_ID

    report = executorch_trt.inspect(path).method(method)
    others = dict.fromkeys(d.backend for d in report.delegates if d.backend != BACKEND_ID)
    label = "; ".join(list(report.engine_labels) + list(others)) or "no delegate"
    return label, report.delegate_summary


def program_path(program_dir: str, name: str, max_seq_len: int) -> str:
    """Where variant `name`'s `.pte` goes: `{name}_{max_seq_len}.pte` in `program_dir`, or,
    for an `EXTERNAL` variant, `program.pte` in a directory of that name (created), since
    ExecuTorch names the data file `model.ptd` whatever the program."""
    if name not in EXTERNAL:
        return os.path.join(program_dir, f"{name}_{max_seq_len}.pte")
    directory = os.path.join(program_dir, f"{name}_{max_seq_len}")
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, "program.pte")


def data_path(name: str, pte_path: str) -> str | None:
    """The `.ptd` of variant `name`'s program at `pte_path`, or None when its weights are in
    the `.pte`."""
    from benchmarks import variants

    return variants.data_path("delegate_external", pte_path) if name in EXTERNAL else None


def decode_method(name: str) -> str:
    """The method a variant's decode steps run."""
    return llm_recipe.METHOD if name in RECIPES else "decode"


def export_variant(config: GenerateConfig, name: str, model, out_path: str) -> dict:
    """Exports program variant `name` of the transformers `model` to `out_path`; returns
    {"export_s": wall seconds from the model to the written `.pte` (torch.export, lowering,
    serialisation), "convert_s": the recipe's checkpoint conversion (s; 0 otherwise)}."""
    from benchmarks import variants

    start = time.perf_counter()
    if name in RECIPES:
        times = llm_recipe.export(
            model,
            config.spec.dims,
            config.max_seq_len,
            config.max_tokens_per_call(),
            out_path,
            group_size=QUANT_GROUP_SIZE if name in QUANTIZED else None,
        )
        return {"export_s": times["export_s"], "convert_s": times["convert_s"]}
    if name in QUANTIZED:
        from executorch_trt.llm import quantize

        quantize(model, "8da4w", QUANT_GROUP_SIZE, embedding="int8")
    methods = _methods(config, model)
    if name in DELEGATES:
        manager = variants.build_delegate(methods, name if name in EXTERNAL else "delegate_inplace")
        if name in EXTERNAL:
            manager.write_tensor_data_to_file(os.path.dirname(out_path))
    else:
        manager = variants.build_plain(methods, [name])[name]
    with open(out_path, "wb") as f:
        f.write(manager.buffer)
    return {"export_s": time.perf_counter() - start, "convert_s": 0.0}


def _last(logits: torch.Tensor, vocab: int) -> torch.Tensor:
    return logits.reshape(-1, vocab)[-1]


def load_runner(config: GenerateConfig, name: str, path: str | None) -> Runner:
    """Loads variant `name` (`path`: its `.pte`; None for eager, which builds the seeded
    model) as a Runner."""
    vocab = config.spec.dims.vocab_size
    if name == EAGER:
        from executorch_trt.llm.decoder_programs import exportable_module, last_token_logits

        model = config.spec.build(config.max_seq_len)
        module = exportable_module(model, config.max_seq_len)

        def eager_call(ids: torch.Tensor, start: int) -> torch.Tensor:
            # The LM head on the last position only, as transformers' generate() runs it.
            positions = torch.arange(start, start + ids.shape[1], dtype=torch.long)
            with torch.no_grad(), last_token_logits(model):
                return _last(module(input_ids=ids, cache_position=positions), vocab)

        return Runner(eager_call, lambda tok, pos: eager_call(torch.tensor([[tok]]), pos))
    assert path is not None and os.path.isfile(path), f"{name}: no program at {path!r}"
    if name in RECIPES:
        forward = llm_recipe.load_forward(path)

        def recipe_call(ids: torch.Tensor, start: int) -> torch.Tensor:
            out = forward.execute([ids, torch.tensor([start], dtype=torch.long)])
            return _last(out[0], vocab)

        return Runner(recipe_call, lambda tok, pos: recipe_call(torch.tensor([[tok]]), pos))
    if name in DELEGATES:
        from executorch_trt import runtime as trt_runtime

        program = trt_runtime.load(path, data=data_path(name, path))
    else:
        from executorch.runtime import Runtime

        program = Runtime.get().load_program(path)
    # Both methods first: loading a method re-initialises the shared cache.
    prefill, decode = program.load_method("prefill"), program.load_method("decode")

    def prefill_call(ids: torch.Tensor, start: int) -> torch.Tensor:
        positions = torch.arange(start, start + ids.shape[1], dtype=torch.long)
        return _last(prefill.execute([ids, positions])[0], vocab)

    def decode_call(tok: int, pos: int) -> torch.Tensor:
        out = decode.execute([torch.tensor([[tok]]), torch.tensor([pos], dtype=torch.long)])
        return _last(out[0], vocab)

    return Runner(prefill_call, decode_call)
