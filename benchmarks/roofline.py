"""The memory roofline of a decode step: the machine's measured memory bandwidth, the weight
bytes one token must read, and the least time per token the two allow.

Rule for the bytes a token must read: every parameter once (a tensor shared by two modules,
e.g. a tied embedding / output layer, once), except an input embedding table that is not also
the output layer, of which a token reads only its own row (`hidden_size` values). The KV cache
a step reads (growing with the position) is not counted: the figure is the floor set by the
weights alone.
"""

from __future__ import annotations

import time

import torch


def weight_bytes_per_token(model: torch.nn.Module) -> int:
    """Bytes of parameters one decode step of the transformers causal LM `model` must read
    (the module docstring's rule)."""
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    tied = output is not None and output.weight.data_ptr() == embedding.data_ptr()
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        if p.data_ptr() == embedding.data_ptr() and not tied:
            total += p.shape[1] * p.element_size()  # one row
        else:
            total += p.numel() * p.element_size()
    return total


def measure_bandwidth(mib: int, repeats: int, threads: int) -> dict:
    """The machine's copy bandwidth: `torch.Tensor.copy_` of a `mib`-MiB float32 buffer into
    another with `threads` intra-op threads, `repeats` times after one untimed copy; the
    fastest. Returns {"bytes_per_s" (bytes read + written / s of the fastest copy), "buffer_bytes",
    "repeats", "threads", "method"}."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n = mib * (1 << 20) // 4
        src = torch.ones(n, dtype=torch.float32)
        dst = torch.empty_like(src)
        dst.copy_(src)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            dst.copy_(src)
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    nbytes = n * 4
    return {
        "bytes_per_s": 2 * nbytes / best,
        "buffer_bytes": nbytes,
        "repeats": repeats,
        "threads": threads,
        "method": f"torch copy_ of {mib} MiB float32, best of {repeats}, (read + written) / time",
    }


def min_ms_per_token(weight_bytes: int, bytes_per_s: float) -> float:
    """The least ms per decode step the bandwidth allows for `weight_bytes`."""
    return weight_bytes / bytes_per_s * 1e3


def fraction(min_ms: float, step_ms: float | None) -> float | None:
    """A step's fraction of the roofline (min_ms / step_ms; 1.0 = at the roofline)."""
    return None if not step_ms else min_ms / step_ms
