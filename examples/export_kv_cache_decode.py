"""Exports a Llama-architecture decoder with a static KV cache through executorch_trt.

Writes one program with two methods that share the KV cache (same buffer FQNs, shared
mutable buffers): `prefill(input_ids[1, T], cache_position[T]) -> logits[1, T, V]` for any
prompt length T in [1, max_seq_len] (a `torch.export.Dim`, blob format version 2; or only
--prompt-len with --static-prefill) and `decode(input_ids[1, 1], cache_position[1]) ->
logits[1, 1, V]`, plus a JSON reference computed with eager PyTorch on the same weights for a
fixed prompt: the greedy tokens, each step's last-position logits, and each step's cache
checksums (see `cache_checksum`); and for each of --extra-prompt-lens a further prompt of that
length with --extra-prompt-steps decode steps, each from empty caches ("prompts").

The model is a Hugging Face `transformers` LlamaForCausalLM with seeded random weights
(no hub download): 2 layers, grouped-query attention (4 query heads, 2 KV heads), a static
cache of --max-seq-len positions. Output is byte-identical across runs (fixed seeds).

usage: export_kv_cache_decode.py --pte OUT.pte --reference OUT.json
           [--steps N] [--max-seq-len S] [--prompt-len T] [--kv-cache inplace|copy_back]
           [--variant normal|clear_cache] [--no-inplace-planning] [--data OUT.ptd]
           [--static-prefill] [--extra-prompt-lens 1,3,...] [--extra-prompt-steps N]
`--variant clear_cache` exports a deliberately broken program whose decode method zeroes its
cache before every step (the cache does not persist): the checker must reject it.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import executorch_trt
from decoder_model import build_model, cache_buffers, cache_checksum, exportable_decoder
from executorch_trt.format.wire import EXTERNAL_WEIGHTS_TAG


def reference(module, prompt: torch.Tensor, steps: int) -> dict:
    """Eager greedy decoding: prefill the prompt, then `steps` single-token decode steps."""
    t = prompt.shape[1]
    records = []
    with torch.no_grad():
        logits = module(prompt, torch.arange(t, dtype=torch.long))
        for step in range(steps + 1):
            last = logits[0, -1]
            token = int(torch.argmax(last))
            records.append(
                {
                    "step": step,
                    "token": token,
                    "logits": [float(x) for x in last],
                    "cache_checksums": {
                        k: cache_checksum(v) for k, v in cache_buffers(module).items()
                    },
                }
            )
            if step == steps:
                break
            logits = module(torch.tensor([[token]]), torch.tensor([t + step], dtype=torch.long))
    return records


def _lengths(text: str) -> list:
    try:
        lengths = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated prompt lengths, got {text!r}"
        ) from exc
    if any(n < 1 for n in lengths):
        raise argparse.ArgumentTypeError(f"prompt lengths must be >= 1, got {text!r}")
    return lengths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pte", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--prompt-len", type=int, default=6)
    p.add_argument("--kv-cache", default="inplace", choices=["inplace", "copy_back"])
    p.add_argument("--variant", default="normal", choices=["normal", "clear_cache"])
    p.add_argument(
        "--data",
        help="export with external_weights=True and write the program's "
        "external data file (.ptd: its XNNPACK weights) here; load the .pte with it "
        "(runner --data, runtime.load(pte, data=...))",
    )
    p.add_argument(
        "--no-inplace-planning",
        action="store_true",
        help="finalise without the in-place memory planning (ExecuTorch's write-back "
        "copies the cache; the delegate reflects its update into a separate "
        "output): still correct, but not zero-copy",
    )
    p.add_argument(
        "--static-prefill",
        action="store_true",
        help="export prefill for --prompt-len tokens only (no dynamic length)",
    )
    p.add_argument(
        "--extra-prompt-lens",
        type=_lengths,
        default=[1, 3, 17],
        help='further prompt lengths for the reference\'s "prompts" (default '
        "1,3,17; empty for none)",
    )
    p.add_argument(
        "--extra-prompt-steps",
        type=int,
        default=2,
        help="decode steps after each further prompt (default 2)",
    )
    args = p.parse_args(argv)
    if args.prompt_len + args.steps > args.max_seq_len:
        p.error("--prompt-len + --steps must fit in --max-seq-len")
    if any(n + args.extra_prompt_steps > args.max_seq_len for n in args.extra_prompt_lens):
        p.error("each --extra-prompt-lens + --extra-prompt-steps must fit in --max-seq-len")

    model = build_model(args.max_seq_len)
    module = exportable_decoder(model, args.max_seq_len)
    torch.manual_seed(1)
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt_len), dtype=torch.long)

    # Reference first; then export a fresh wrapper (new, zeroed caches; same weights).
    ref_steps = reference(module, prompt, args.steps)
    prompts = []
    for length in args.extra_prompt_lens:
        extra = torch.randint(0, model.config.vocab_size, (1, length), dtype=torch.long)
        fresh = exportable_decoder(model, args.max_seq_len)
        prompts.append(
            {
                "prompt": [int(x) for x in extra[0]],
                "steps": reference(fresh, extra, args.extra_prompt_steps),
            }
        )
    module = exportable_decoder(
        model, args.max_seq_len, clear_cache_each_call=args.variant == "clear_cache"
    )
    t = args.prompt_len
    # Any prompt length up to the cache's: input_ids[1, T] and cache_position[T] share T.
    length = torch.export.Dim("T", min=1, max=args.max_seq_len)
    dynamic = (
        None if args.static_prefill else {"input_ids": {1: length}, "cache_position": {0: length}}
    )
    with torch.no_grad():
        prefill = torch.export.export(
            module,
            (prompt, torch.arange(t, dtype=torch.long)),
            dynamic_shapes=dynamic,
            strict=False,
        )
        decode = torch.export.export(
            module, (torch.tensor([[0]]), torch.tensor([t], dtype=torch.long)), strict=False
        )
        program = executorch_trt.export(
            {"prefill": prefill, "decode": decode},
            kv_cache=args.kv_cache,
            emit_mutable_buffer_names=True,
            inplace=not args.no_inplace_planning,
            external_weights=args.data is not None,
            # The example promises zero copies: any state buffer that would be copied back
            # fails the export (executorch_trt.NotInPlaceError) instead of a warning. Not for
            # the deliberately broken clear_cache variant, whose cache zeroing is not in place.
            require_inplace=(
                args.kv_cache == "inplace"
                and not args.no_inplace_planning
                and args.variant == "normal"
            ),
        )

    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    if args.data is not None:
        with tempfile.TemporaryDirectory() as tmp:
            program.write_tensor_data_to_file(tmp)  # writes <EXTERNAL_WEIGHTS_TAG>.ptd
            shutil.move(os.path.join(tmp, f"{EXTERNAL_WEIGHTS_TAG}.ptd"), args.data)
    caches = cache_buffers(module)
    ref = {
        "format": "executorch_trt.kv_cache_decode_reference/1",
        "model": "LlamaForCausalLM (seeded random weights)",
        "config": {
            k: getattr(model.config, k)
            for k in (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
            )
        },
        "max_seq_len": args.max_seq_len,
        "kv_cache": args.kv_cache,
        "variant": args.variant,
        "prompt": [int(x) for x in prompt[0]],
        "caches": [
            {"name": k, "shape": list(v.shape), "dtype": "float32"} for k, v in caches.items()
        ],
        "steps": ref_steps,
        "prompts": prompts,
    }
    with open(args.reference, "w") as f:
        json.dump(ref, f, indent=None, separators=(",", ":"))
        f.write("\n")
    data = f", {args.data}" if args.data is not None else ""
    print(
        f"wrote {args.pte} ({len(program.buffer)} bytes){data} and {args.reference}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
