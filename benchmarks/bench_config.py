"""What the decode benchmark measures: the model's dimensions and the run settings.

`FULL` is the configuration the README's table comes from; `QUICK` is the tiny configuration
the test runs (`--quick`). A `BenchConfig` travels to the per-variant worker processes as JSON,
so every process builds exactly the same seeded model.
"""

from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class ModelDims:
    """LlamaConfig fields of the seeded decoder (`decoder_model.build_model` overrides)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def cache_nbytes(self, max_seq_len: int) -> int:
        """Bytes of all KV caches (float32 key + value, every layer) at `max_seq_len`."""
        per_tensor = self.num_key_value_heads * max_seq_len * self.head_dim * 4
        return 2 * self.num_hidden_layers * per_tensor

    def describe(self) -> str:
        """One line for the table header."""
        return (
            f"Llama: {self.num_hidden_layers} layers, hidden {self.hidden_size}, "
            f"{self.num_attention_heads} heads / {self.num_key_value_heads} KV heads "
            f"(head_dim {self.head_dim}), MLP {self.intermediate_size}, vocab {self.vocab_size}, "
            "float32"
        )


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """Settings of one benchmark run.

    * `dims`: the model.
    * `max_seq_lens`: cache capacities (positions) to measure.
    * `prompt_len`: prefill length; every timed decode step runs at position `prompt_len`.
    * `repeats`: timed decode steps per variant and capacity; `warmup`: untimed steps before.
    * `lead_in_ms`: in every timing round, a variant's decode steps run back to back for at
      least this long (ms; at least one step) before its timed step; 0: the timed step directly
      follows another variant's. A decode loop runs its steps back to back; the steps right
      after another variant's pay for what it left behind (its threads or its CPU cache
      footprint: not told apart), for ~3 ms after `executorch_xnnpack`'s 4096-position step
      (benchmarks/README.md, "Why the Python rounds grow"). The first lead-in step is timed
      too, as the "after a switch" step (reported, not judged).
    * `threads`: intra-op threads for PyTorch and ExecuTorch's threadpool, in every variant.
    """

    dims: ModelDims
    max_seq_lens: tuple[int, ...]
    prompt_len: int
    repeats: int
    warmup: int
    threads: int
    lead_in_ms: float = 5.0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> BenchConfig:
        d = json.loads(text)
        return BenchConfig(
            dims=ModelDims(**d["dims"]),
            max_seq_lens=tuple(d["max_seq_lens"]),
            prompt_len=d["prompt_len"],
            repeats=d["repeats"],
            warmup=d["warmup"],
            threads=d["threads"],
            lead_in_ms=d["lead_in_ms"],
        )

    def replace(self, **changes) -> BenchConfig:
        return dataclasses.replace(self, **changes)

    def model_overrides(self) -> dict[str, int]:
        """Keyword arguments for `decoder_model.build_model`."""
        return dataclasses.asdict(self.dims)


# Positional: vocab, hidden, MLP (intermediate), layers, query heads, KV heads.
FULL_DIMS = ModelDims(1024, 256, 512, 4, 8, 4)
QUICK_DIMS = ModelDims(128, 64, 128, 1, 4, 2)


def full_config(threads: int) -> BenchConfig:
    """The README configuration: 256/1024/2048/4096 positions, 100 timed steps."""
    return BenchConfig(
        FULL_DIMS, (256, 1024, 2048, 4096), prompt_len=32, repeats=100, warmup=5, threads=threads
    )


def quick_config(threads: int) -> BenchConfig:
    """The test configuration: a 1-layer toy model, one capacity (32 positions), 2 timed steps
    (each capacity costs ~1 min of lowering on 2 cores; pass --max-seq-lens for more)."""
    return BenchConfig(QUICK_DIMS, (32,), prompt_len=4, repeats=2, warmup=1, threads=threads)
