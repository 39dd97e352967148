"""The benchmark's workload: the seeded model at one cache capacity and its fixed inputs.

Every variant runs the same thing: prefill a seeded prompt of `prompt_len` tokens at positions
`0..prompt_len-1`, then decode one token at position `prompt_len`, repeatedly. Re-running the
decode step at the same position writes the same cache row and reads the same (static-size)
cache, so every timed step does identical work.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from benchmarks.bench_config import BenchConfig

DECODE_TOKEN = 1


def eager_module(config: BenchConfig, max_seq_len: int) -> torch.nn.Module:
    """The seeded decoder wrapped for export (`forward(input_ids, cache_position) -> logits`),
    with a static cache of `max_seq_len` positions."""
    from decoder_model import build_model, exportable_decoder

    model = build_model(max_seq_len, **config.model_overrides())
    return exportable_decoder(model, max_seq_len)


def prefill_inputs(config: BenchConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids[1, prompt_len], cache_position[prompt_len]): a seeded prompt."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(
        0, config.dims.vocab_size, (1, config.prompt_len), generator=generator, dtype=torch.long
    )
    return ids, torch.arange(config.prompt_len, dtype=torch.long)


def decode_inputs(config: BenchConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids[1, 1], cache_position[1]): one token at the fixed position `prompt_len`."""
    return (
        torch.tensor([[DECODE_TOKEN]], dtype=torch.long),
        torch.tensor([config.prompt_len], dtype=torch.long),
    )


def cache_shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """Shape of every KV cache buffer of `module`, by name."""
    from decoder_model import cache_buffers

    return {name: tuple(buf.shape) for name, buf in cache_buffers(module).items()}


def export_methods(config: BenchConfig, max_seq_len: int):
    """`torch.export`s of the `prefill` and `decode` methods (under no_grad, non-strict), and
    the eager module they came from. Returns (module, {"prefill": ep, "decode": ep})."""
    module = eager_module(config, max_seq_len)
    with torch.no_grad():
        prefill = torch.export.export(module, prefill_inputs(config), strict=False)
        decode = torch.export.export(module, decode_inputs(config), strict=False)
    return module, {"prefill": prefill, "decode": decode}
