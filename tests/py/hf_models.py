"""Tiny seeded `transformers` models for the coverage matrix (tests/py/hf_matrix_test.py).

Real `transformers` classes with seeded random weights (no hub access: set
``HF_HUB_OFFLINE=1``), float32, hidden size 64, 2 layers, vocab 128, static caches of
``MAX_CACHE_LEN`` positions. Each family is exported through transformers' own export
wrappers (``transformers.integrations.executorch``):

* decoder-only (Llama, Qwen3, Phi-3, Gemma-3, GPT-2): ``TorchExportableModuleForDecoderOnlyLM``;
  ``prefill`` and ``decode`` come from two ``.export()`` calls on ONE wrapper, so both methods
  name the same cache buffers (``key_cache_{i}``, ``value_cache_{i}``, ``cumulative_length_{i}``)
  and share them in the program. Gemma-3 mixes sliding-window and full-attention layers
  (``layer_types``) with a window smaller than the prompt plus the decode steps.
* Whisper (``WhisperForConditionalGeneration``): ``encoder`` (input_features -> encoder hidden
  states, a small wrapper over ``model.get_encoder()``), ``prefill`` (the forced decoder
  prefix) and ``decode`` (one token), the last two from ONE
  ``Seq2SeqLMDecoderExportableModuleWithStaticCache``. Every shape is static here; dynamic
  shapes (transformers' ``Seq2SeqLMExportableModule.export`` makes the encoder length dynamic)
  are covered by ``hf_dynamic_shapes_test.py``.

``Family.session(...)`` gives the eager reference on a *fresh* wrapper around the same model
(same weights, zeroed caches); ``ProgramSession`` runs the exported program through
``executorch_trt.runtime`` with the same step interface, so a test drives both identically.

The plan checks (``delegate_backends``, ``operators_outside``, ``state_write_backs``) read the
emitted program (``lowering_utils``; ``executorch_trt.inspect`` for state copies).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

import torch

import executorch_trt
import lowering_utils as lu

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MAX_CACHE_LEN = 32
VOCAB = 128
HIDDEN = 64
PROMPT_LEN = 5
DECODE_STEPS = 7
SEED = 0
# Gemma-3's sliding window: smaller than PROMPT_LEN + DECODE_STEPS, so decoding runs past it.
SLIDING_WINDOW = 4
# Whisper: mel bins x frames (frames = 2 x max_source_positions: the conv stem halves them).
MEL_BINS, SOURCE_POSITIONS = 16, 16
# Whisper's forced decoder prefix (start-of-transcript, language, task, no-timestamps stand-ins).
WHISPER_PREFIX = (3, 4, 5, 6)

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def _llama():
    import transformers as T

    return T.LlamaForCausalLM(T.LlamaConfig(**_COMMON))


def _qwen3():
    import transformers as T

    return T.Qwen3ForCausalLM(T.Qwen3Config(head_dim=16, **_COMMON))


def _phi3():
    import transformers as T

    # Phi-3's defaults put pad/eos/bos outside a 128-token vocabulary (_COMMON sets them).
    return T.Phi3ForCausalLM(T.Phi3Config(**_COMMON))


def _gemma3(sliding_window: int = SLIDING_WINDOW):
    import transformers as T

    config = T.Gemma3TextConfig(
        head_dim=16,
        sliding_window=sliding_window,
        layer_types=["sliding_attention", "full_attention"],
        **_COMMON,
    )
    return T.Gemma3ForCausalLM(config)


def _gpt2():
    import transformers as T

    # initializer_range 0.2 (default 0.02): with the default, greedy decoding repeats one token.
    return T.GPT2LMHeadModel(
        T.GPT2Config(
            vocab_size=VOCAB,
            n_embd=HIDDEN,
            n_layer=2,
            n_head=4,
            n_positions=64,
            bos_token_id=1,
            eos_token_id=2,
            initializer_range=0.2,
        )
    )


def _whisper():
    import transformers as T

    config = T.WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=MEL_BINS,
        d_model=HIDDEN,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=SOURCE_POSITIONS,
        max_target_positions=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=WHISPER_PREFIX[0],
        suppress_tokens=None,
        begin_suppress_tokens=None,
    )
    model = T.WhisperForConditionalGeneration(config)
    # Seq2SeqLMDecoderExportableModuleWithStaticCache reads `model.lm_head`; Whisper calls its
    # output projection `proj_out` (same module, no new weights).
    model.lm_head = model.proj_out
    return model


def seeded(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(SEED)
    model = build().eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    return model


# --- eager sessions: one step interface for eager PyTorch and for the program -------------


class DecoderOnlyEager:
    """Eager reference: a fresh ``TorchExportableModuleForDecoderOnlyLM`` (zeroed caches)."""

    def __init__(self, model):
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

        self.wrapper = TorchExportableModuleForDecoderOnlyLM(
            model, batch_size=1, max_cache_len=MAX_CACHE_LEN
        ).eval()

    def start(self, context) -> None:
        pass

    def step(self, method: str, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        # The outer wrapper's forward drops cache_position; export() exports the inner one.
        with torch.no_grad():
            return self.wrapper.model(input_ids=ids, cache_position=pos)


class WhisperEager:
    """Eager reference: ``model.get_encoder()`` and a fresh
    ``Seq2SeqLMDecoderExportableModuleWithStaticCache`` (zeroed caches)."""

    def __init__(self, model):
        from transformers.integrations.executorch import (
            Seq2SeqLMDecoderExportableModuleWithStaticCache,
        )

        self.encoder = WhisperEncoder(model.get_encoder()).eval()
        self.decoder = Seq2SeqLMDecoderExportableModuleWithStaticCache(
            model, max_static_cache_length=MAX_CACHE_LEN, batch_size=1
        ).eval()
        self.encoder_out = None

    def start(self, input_features) -> torch.Tensor:
        with torch.no_grad():
            self.encoder_out = self.encoder(input_features)
        return self.encoder_out

    def step(self, method, ids, pos):
        with torch.no_grad():
            return self.decoder(ids, self.encoder_out, pos)


class ProgramSession:
    """A fresh ``executorch_trt.runtime.load`` of the program, stepped like the eager session.
    ``copied`` holds the delegate's ``runtime.bytes_copied()`` delta of every call."""

    def __init__(self, buffer: bytes, encoder_decoder: bool):
        from executorch_trt import runtime

        self._runtime = runtime
        self.program = runtime.load(buffer)
        self.methods = {n: self.program.load_method(n) for n in self.program.method_names}
        self.encoder_decoder = encoder_decoder
        self.encoder_out = None
        self.copied: list[tuple[str, int]] = []

    def _execute(self, method, inputs):
        before = self._runtime.bytes_copied()
        out = self.methods[method].execute(inputs)
        self.copied.append((method, self._runtime.bytes_copied() - before))
        return out

    def start(self, context):
        if self.encoder_decoder:
            (self.encoder_out,) = self._execute("encoder", [context])
            return self.encoder_out
        return None

    def step(self, method, ids, pos):
        inputs = [ids, self.encoder_out, pos] if self.encoder_decoder else [ids, pos]
        (logits,) = self._execute(method, inputs)
        return logits


class WhisperEncoder(torch.nn.Module):
    """``forward(input_features[1, MEL_BINS, 2 * SOURCE_POSITIONS]) -> last_hidden_state``
    (transformers' Seq2SeqLMEncoderExportableModule passes ``input_ids``, which Whisper's
    encoder does not take)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_features):
        return self.encoder(input_features=input_features).last_hidden_state


# --- families ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Family:
    """One row of the matrix: how to build, export and step a model."""

    name: str
    build: Callable[[], torch.nn.Module]
    encoder_decoder: bool = False

    @property
    def methods(self) -> tuple[str, ...]:
        return ("encoder", "prefill", "decode") if self.encoder_decoder else ("prefill", "decode")

    def model(self) -> torch.nn.Module:
        return seeded(self.build)

    def prompt(self) -> torch.Tensor:
        """The decoder's first tokens ([1, T] int64): a seeded random prompt, or Whisper's
        forced prefix."""
        if self.encoder_decoder:
            return torch.tensor([WHISPER_PREFIX])
        g = torch.Generator().manual_seed(SEED + 1)
        return torch.randint(3, VOCAB, (1, PROMPT_LEN), generator=g)

    def context(self) -> torch.Tensor | None:
        """The encoder's input (Whisper: seeded log-mel features), else None."""
        if not self.encoder_decoder:
            return None
        g = torch.Generator().manual_seed(SEED + 2)
        return torch.randn(1, MEL_BINS, 2 * SOURCE_POSITIONS, generator=g)

    def eager(self, model):
        return WhisperEager(model) if self.encoder_decoder else DecoderOnlyEager(model)

    def export_methods(self, model) -> dict[str, torch.export.ExportedProgram]:
        """``{method: ExportedProgram}`` through transformers' wrappers, static shapes."""
        prompt = self.prompt()
        t = prompt.shape[1]
        with torch.no_grad():
            if not self.encoder_decoder:
                from transformers.integrations.executorch import (
                    TorchExportableModuleForDecoderOnlyLM,
                )

                wrapper = TorchExportableModuleForDecoderOnlyLM(
                    model, batch_size=1, max_cache_len=MAX_CACHE_LEN
                )
                return {
                    "prefill": wrapper.export(input_ids=prompt, cache_position=torch.arange(t)),
                    "decode": wrapper.export(
                        input_ids=torch.tensor([[7]]), cache_position=torch.tensor([t])
                    ),
                }
            from transformers.integrations.executorch import (
                Seq2SeqLMDecoderExportableModuleWithStaticCache,
            )

            features = self.context()
            encoder = WhisperEncoder(model.get_encoder()).eval()
            encoder_out = encoder(features)
            decoder = Seq2SeqLMDecoderExportableModuleWithStaticCache(
                model, max_static_cache_length=MAX_CACHE_LEN, batch_size=1
            ).eval()
            # strict=True as transformers' own Seq2SeqLMExportableModule; no dynamic_shapes.
            return {
                "encoder": torch.export.export(encoder, (features,), strict=True),
                "prefill": torch.export.export(
                    decoder, (prompt, encoder_out, torch.arange(t)), strict=True
                ),
                "decode": torch.export.export(
                    decoder, (torch.tensor([[7]]), encoder_out, torch.tensor([t])), strict=True
                ),
            }


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("llama", _llama),
        Family("qwen3", _qwen3),
        Family("phi3", _phi3),
        Family("gemma3", _gemma3),
        Family("gpt2", _gpt2),
        Family("whisper", _whisper, encoder_decoder=True),
    ]
}


# --- greedy decoding, program vs eager -------------------------------------------------------


@dataclasses.dataclass
class StepResult:
    method: str
    token: int  # eager's greedy token (fed to both sides next)
    program_token: int  # the program's greedy token
    max_abs_diff: float  # max |program logits - eager logits| over the step's positions
    scale: float  # max(1, max |eager logits|)
    bytes_copied: int  # the delegate's runtime.bytes_copied() delta for this call


def greedy_decode(
    family: Family, model, program_buffer: bytes, steps: int = DECODE_STEPS
) -> tuple[list[StepResult], dict]:
    """Prefill plus ``steps`` greedy decode steps on the program and on a fresh eager wrapper.
    Eager's token is fed to both sides (teacher forcing), so one differing token is reported
    at its step instead of derailing the rest. Returns the steps and ``extra``: ``inputs``
    (method, ids, positions) and ``eager_logits`` per step, ``copied`` (method, delegate bytes)
    per call, and for Whisper the encoder comparison."""
    eager = family.eager(model)
    program = ProgramSession(program_buffer, family.encoder_decoder)
    extra = {}
    context = family.context()
    want_ctx, got_ctx = eager.start(context), program.start(context)
    if want_ctx is not None:
        extra["encoder_max_abs_diff"] = float((got_ctx - want_ctx).abs().max())
        extra["encoder_scale"] = max(1.0, float(want_ctx.abs().max()))
    ids = family.prompt()
    pos = torch.arange(ids.shape[1])
    results = []
    extra["inputs"], extra["eager_logits"] = [], []
    for step in range(steps + 1):
        method = "prefill" if step == 0 else "decode"
        want = eager.step(method, ids, pos)
        got = program.step(method, ids, pos)
        extra["inputs"].append((method, ids, pos))
        extra["eager_logits"].append(want)
        if got.shape != want.shape:
            raise AssertionError(
                f"{family.name} {method} step {step}: program logits "
                f"{tuple(got.shape)} vs eager {tuple(want.shape)}"
            )
        token = int(want[0, -1].argmax())
        results.append(
            StepResult(
                method=method,
                token=token,
                program_token=int(got[0, -1].argmax()),
                max_abs_diff=float((got - want).abs().max()),
                scale=max(1.0, float(want.abs().max())),
                bytes_copied=program.copied[-1][1],
            )
        )
        next_pos = int(pos[-1]) + 1
        ids, pos = torch.tensor([[token]]), torch.tensor([next_pos])
    extra["copied"] = list(program.copied)
    return results, extra


# --- plan checks (to be replaced by executorch_trt.inspect) ----------------------------------


def delegate_backends(et, method: str) -> list[str]:
    """Backend ids of the method's DelegateCall instructions, in execution order."""
    plan = lu.execution_plan(et, method)
    calls = [a for a in lu.instructions(plan) if type(a).__name__ == "DelegateCall"]
    return [plan.delegates[c.delegate_index].id for c in calls]


def operators_outside(et, method: str) -> list[str]:
    """Operators ExecuTorch runs itself in the method (outside every delegate)."""
    plan = lu.execution_plan(et, method)
    return [o.name + ("." + o.overload if o.overload else "") for o in plan.operators]


def state_write_backs(et, method: str) -> list[tuple[str, int]]:
    """``(buffer name, bytes per call)`` of every mutable buffer (state) that ExecuTorch copies
    back in ``method`` (``executorch_trt.inspect``: update mode ``written_back``). Empty means
    no state is copied per call."""
    report = executorch_trt.inspect(et).method(method)
    return [(b.name, b.bytes_copied_per_call) for b in report.state if b.bytes_copied_per_call]


# --- the matrix table -----------------------------------------------------------------------

MATRIX_HEADER = (
    "| model | delegates per method | state bytes copied per step "
    "| max abs dlogit | tolerance | tokens | export s | run s |"
)
MATRIX_RULE = "|---|---|---|---|---|---|---|---|"
MATRIX_BEGIN = "===== BEGIN hf coverage matrix ====="
MATRIX_END = "===== END hf coverage matrix ====="


def matrix_row(
    name: str,
    delegates: dict[str, Sequence[str]],
    write_back_bytes: dict[str, int],
    copied: Sequence[tuple[str, int]],
    steps: Sequence[StepResult],
    export_s: float,
    run_s: float,
) -> dict[str, object]:
    """A row as a dict (for JSON) with ``"markdown"`` the table row. State bytes copied per
    step, per method = ``executorch_trt.inspect``'s state bytes copied per call (ExecuTorch's
    write-backs plus the delegate's reflect copies, from the plan), or the delegate's largest
    measured counter delta (``copied``: (method, bytes) per call) if that is larger: the
    measurement can only add copies the plan does not show, never double-count them."""
    per_method = {}
    for method, nbytes in write_back_bytes.items():
        deltas = [n for m, n in copied if m == method]
        per_method[method] = max(nbytes, max(deltas, default=0))
    max_diff = max(s.max_abs_diff for s in steps)
    tol = min(1e-4 * s.scale for s in steps)
    tokens_equal = all(s.token == s.program_token for s in steps)
    row = dict(
        model=name,
        delegates={m: len(d) for m, d in delegates.items()},
        backends=sorted({b for d in delegates.values() for b in d}),
        state_bytes_copied_per_step=per_method,
        max_abs_dlogit=max_diff,
        tolerance=tol,
        tokens_equal=tokens_equal,
        steps=len(steps),
        export_s=round(export_s, 1),
        run_s=round(run_s, 1),
    )
    fmt = lambda d: ", ".join(f"{m} {v}" for m, v in d.items())  # noqa: E731
    row["markdown"] = (
        f"| {name} | {fmt(row['delegates'])} | {fmt(per_method)} | {max_diff:.2e} | "
        f"{tol:.0e} | {'equal' if tokens_equal else 'DIFFER'} "
        f"(prefill + {len(steps) - 1} decode) | "
        f"{export_s:.1f} | {run_s:.1f} |"
    )
    return row


def full_forward_logits(family: Family, model, ids: torch.Tensor) -> torch.Tensor:
    """Logits ``[1, N, vocab]`` of the plain model on the whole sequence ``ids`` with no
    cache (Whisper: on the family's input features): what the cached steps must reproduce."""
    with torch.no_grad():
        if family.encoder_decoder:
            return model(
                input_features=family.context(), decoder_input_ids=ids, use_cache=False
            ).logits
        return model(input_ids=ids, use_cache=False).logits
