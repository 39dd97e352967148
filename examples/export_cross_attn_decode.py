"""Exports a Whisper-architecture model with torch.cond cross-attention caches through
executorch_trt.

Writes one program with three methods that share every cache (same buffer FQNs, shared
mutable buffers; see examples/whisper_cross_attn.py):
`encode(input_features[1, M, F]) -> encoder_hidden_states[1, S, D]`,
`prefill(decoder_input_ids[1, P], cache_position[P], encoder_hidden_states) -> logits[1, P, V]`
and `decode(decoder_input_ids[1, 1], cache_position[1], encoder_hidden_states) ->
logits[1, 1, V]`, plus a JSON reference computed with eager PyTorch on the same weights for
TWO utterances (two seeded input_features) decoded one after the other the way an application
drives the program: zero the cross-attention caches, encode, prefill Whisper's forced prefix,
then --steps greedy decode steps; the self-attention caches are not zeroed between utterances
(each step writes its positions before reading them and the mask hides later ones). Per
utterance it records the input features, the encoder output, and per step the greedy token,
the last-position logits and every cache's checksum (see `cache_checksum`). Output is
byte-identical across runs (fixed seeds).

The model is a Hugging Face `transformers` WhisperForConditionalGeneration with seeded random
weights (no hub download): 2 encoder and 2 decoder layers, d_model 32, 4 heads, vocab 96, 8 mel
bins, 8 encoder positions, whose decoder attention is swapped for static self-attention caches
and torch.cond cross-attention caches.

usage: export_cross_attn_decode.py --pte OUT.pte --reference OUT.json
           [--steps N] [--max-seq-len S] [--variant normal|recompute_every_step]
`--variant recompute_every_step` exports a deliberately wasteful program whose cross-attention
predicate is never true, so every decode step recomputes the cross K/V (same values, so its
logits and caches still match the reference): the checker must reject it.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import executorch_trt
import whisper_cross_attn as W

FORMAT = "executorch_trt.cross_attn_decode_reference/1"
# The seeds of the two utterances' input features.
UTTERANCE_SEEDS = (1, 2)


def _tensor(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "data": [float(x) for x in t.reshape(-1)]}


def reference(model, features, prompt: torch.Tensor, steps: int) -> list:
    """The eager reference of each utterance (whisper_cross_attn.greedy_reference) as JSON."""
    utterances = []
    for feats, utt in zip(features, W.greedy_reference(model, features, prompt, steps)):
        utterances.append(
            {
                "input_features": _tensor(feats),
                "encoder_hidden_states": _tensor(utt["encoder_hidden_states"]),
                "steps": [
                    {
                        "step": s["step"],
                        "token": s["token"],
                        "logits": [float(x) for x in s["logits"]],
                        "cache_checksums": {n: W.cache_checksum(c) for n, c in s["caches"].items()},
                    }
                    for s in utt["steps"]
                ],
            }
        )
    return utterances


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pte", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-seq-len", type=int, default=W.CONFIG["max_target_positions"])
    p.add_argument("--variant", default="normal", choices=["normal", "recompute_every_step"])
    args = p.parse_args(argv)
    prompt = torch.tensor([W.PREFIX], dtype=torch.long)
    if not 1 <= args.max_seq_len <= W.CONFIG["max_target_positions"]:
        p.error(f"--max-seq-len must be in [1, {W.CONFIG['max_target_positions']}]")
    if args.steps < 0 or prompt.shape[1] + args.steps > args.max_seq_len:
        p.error("--steps must be >= 0 and the prompt plus --steps must fit in --max-seq-len")

    # Reference on one swapped model; export another built from the same seed (same weights,
    # zeroed caches), with the variant's cross-attention.
    eager = W.swap_decoder_attention(W.build_model(), args.max_seq_len)
    features = [W.input_features(eager.config, seed) for seed in UTTERANCE_SEEDS]
    utterances = reference(eager, features, prompt, args.steps)
    variant = "cond" if args.variant == "normal" else args.variant
    model = W.swap_decoder_attention(W.build_model(), args.max_seq_len, cross_variant=variant)
    with torch.no_grad():
        program = executorch_trt.export(
            W.export_methods(model, prompt.shape[1]),
            emit_mutable_buffer_names=True,
            # The example promises zero copies: a cache that would be copied back fails the
            # export (executorch_trt.NotInPlaceError) instead of a warning.
            require_inplace=True,
        )

    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    config = model.config
    caches = [
        {"name": n, "shape": list(b.shape), "dtype": "float32", "kind": "self"}
        for n, b in W.self_caches(model).items()
    ]
    caches += [
        {"name": n, "shape": list(b.shape), "dtype": "float32", "kind": "cross"}
        for n, b in W.cross_caches(model).items()
    ]
    ref = {
        "format": FORMAT,
        "model": "WhisperForConditionalGeneration (seeded random weights), decoder attention "
        "swapped: static self-attention caches, torch.cond cross-attention caches",
        "config": {
            k: getattr(config, k)
            for k in (
                "vocab_size",
                "d_model",
                "encoder_layers",
                "decoder_layers",
                "decoder_attention_heads",
                "num_mel_bins",
                "max_source_positions",
            )
        },
        "max_seq_len": args.max_seq_len,
        "kv_cache": "inplace",
        "variant": args.variant,
        "prompt": [int(x) for x in prompt[0]],
        "caches": caches,
        "utterances": utterances,
    }
    with open(args.reference, "w") as f:
        json.dump(ref, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.pte} ({len(program.buffer)} bytes) and {args.reference}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
