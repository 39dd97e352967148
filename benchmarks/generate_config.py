"""What the generation benchmark (`generate.py`) measures: the model and the run's settings.

A `GenerateConfig` travels to the worker processes as JSON, so every process builds exactly
the same seeded model (`examples/decoder_model.build_model`).
"""

from __future__ import annotations

import dataclasses
import json

import decoder_model
from benchmarks.bench_config import ModelDims


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A seeded decoder: its dimensions, whether the output layer is the embedding table
    (`tie_word_embeddings`), and the RMSNorm epsilon and RoPE base, set explicitly on both the
    transformers config and ExecuTorch's recipe (`llm_recipe.params`)."""

    name: str
    dims: ModelDims
    tie_word_embeddings: bool
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    def overrides(self) -> dict:
        """Keyword arguments for `decoder_model.build_model`."""
        return {
            **dataclasses.asdict(self.dims),
            "tie_word_embeddings": self.tie_word_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
        }

    def build(self, max_seq_len: int):
        """The seeded transformers LlamaForCausalLM (float32) for a cache of `max_seq_len`."""
        return decoder_model.build_model(max_seq_len, **self.overrides())

    def describe(self) -> str:
        tied = "tied" if self.tie_word_embeddings else "untied"
        return (
            f"{self.name}: {self.dims.describe()}, {tied} embeddings, rms_norm_eps "
            f"{self.rms_norm_eps:g}, rope_theta {self.rope_theta:g}"
        )


#: `decoder_model.build_model`'s defaults (2 layers, hidden 64, vocab 512, untied).
TINY = ModelSpec("tiny", ModelDims(**decoder_model.DEFAULT_DIMS), tie_word_embeddings=False)

#: The shape of HuggingFaceTB/SmolLM-135M (seeded random weights, no download): vocab 49152,
#: hidden 576, MLP 1536, 30 layers, 9 query / 3 KV heads, tied embeddings.
SMOLLM_135M = ModelSpec(
    "smollm-135m", ModelDims(49152, 576, 1536, 30, 9, 3), tie_word_embeddings=True
)

#: The shape of Qwen/Qwen2.5-0.5B as a Llama (seeded random weights, no download): vocab 151936,
#: hidden 896, MLP 4864, 24 layers, 14 query / 2 KV heads, tied embeddings, RMSNorm epsilon 1e-6,
#: RoPE base 1e6; without Qwen2's q/k/v biases (a Llama has none, nor has the recipe's checkpoint
#: `llm_recipe` converts it to). 494M parameters, 1.98 GB in float32.
QWEN25_05B = ModelSpec(
    "qwen2.5-0.5b",
    ModelDims(151936, 896, 4864, 24, 14, 2),
    tie_word_embeddings=True,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
)

MODELS = {m.name: m for m in (TINY, SMOLLM_135M, QWEN25_05B)}


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """Settings of one run; the defaults are the full measurement's (`full_config`).

    * `model`: a key of MODELS; `max_seq_len`: the static cache's capacity (positions).
    * `prompt_len`: the generation's prompt (tokens at positions 0..prompt_len-1); greedy
      decode then runs one step per position prompt_len..max_seq_len-1.
    * `prefill_lens`: prompt lengths whose time to first token is measured (each at most
      `max_seq_len - prompt_len`: see `effective_prefill_lens`).
    * `end_steps`: the "near the end" statistic is the median of the steps at the last
      `end_steps` positions.
    * `segment`: per round, each variant runs this many consecutive decode steps (variants in
      an order shuffled every round); the first step of each segment, right after another
      variant's, is reported apart (`after_switch`) and left out of the decode statistics.
    * `repeats`: whole generations timed per variant; `prefill_repeats`: timed prefills per
      variant and length; `warmup`: untimed decode steps per variant before timing (after
      one untimed prefill of each length).
    * `threads`: intra-op threads for PyTorch and ExecuTorch's threadpool.
    * `bandwidth_mib`, `bandwidth_repeats`: the copy that measures memory bandwidth.
    """

    model: str
    max_seq_len: int
    threads: int
    prompt_len: int = 64
    prefill_lens: tuple[int, ...] = (64, 512)
    end_steps: int = 16
    segment: int = 16
    repeats: int = 2
    prefill_repeats: int = 5
    warmup: int = 3
    bandwidth_mib: int = 512
    bandwidth_repeats: int = 10

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]

    def effective_prefill_lens(self) -> tuple[int, ...]:
        """`prefill_lens`, each clipped to `max_seq_len - prompt_len` (a 512-token prompt in a
        512-position cache would leave no position to decode; it is timed as 448 tokens)."""
        room = self.max_seq_len - self.prompt_len
        return tuple(dict.fromkeys(min(n, room) for n in self.prefill_lens))

    def max_tokens_per_call(self) -> int:
        """The most tokens one prefill call takes (the longest prefill)."""
        return max((*self.effective_prefill_lens(), self.prompt_len))

    def decode_positions(self) -> list[int]:
        """The positions the generation decodes at: prompt_len..max_seq_len-1."""
        return list(range(self.prompt_len, self.max_seq_len))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> GenerateConfig:
        d = json.loads(text)
        d["prefill_lens"] = tuple(d["prefill_lens"])
        return GenerateConfig(**d)

    def replace(self, **changes) -> GenerateConfig:
        return dataclasses.replace(self, **changes)


def full_config(model: str, max_seq_len: int, threads: int) -> GenerateConfig:
    """A measurement, with `GenerateConfig`'s defaults: prompt 64, prefills of 64 and 512
    tokens, 2 generations, 5 prefills."""
    return GenerateConfig(model=model, max_seq_len=max_seq_len, threads=threads)


def quick_config(threads: int) -> GenerateConfig:
    """The test's run: the tiny model, 48 positions, prompt 8, prefills of 8 and 32 tokens,
    one generation, a small bandwidth copy."""
    return GenerateConfig(
        model="tiny",
        max_seq_len=48,
        prompt_len=8,
        prefill_lens=(8, 32),
        end_steps=4,
        segment=8,
        repeats=1,
        prefill_repeats=1,
        warmup=1,
        threads=threads,
        bandwidth_mib=32,
        bandwidth_repeats=2,
    )
