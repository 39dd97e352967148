"""Tiny seeded causal LMs saved as checkpoint directories, and a tokenizer ExecuTorch's LLM
runner reads, for the ``executorch_trt.llm`` tests.

The tokenizer is a tiktoken file (one ``base64(token bytes) rank`` line per token), the format
``TextLLMRunner`` loads for a path that is not a HF ``tokenizer.json``; the runner appends
Llama 3's 256 special tokens after the file's tokens (``<|begin_of_text|>`` = BOS,
``<|end_of_text|>`` = EOS). Every token of the file is one ASCII character, so every piece the
runner hands its token callback is valid UTF-8 on its own (a byte-level BPE piece that is part
of a multi-byte character makes the Python binding raise UnicodeDecodeError in the callback).
"""

from __future__ import annotations

import base64
import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: The tokenizer's own tokens, ranks 0..len-1: lowercase letters, digits, space, punctuation.
TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 .,!?'-:;\n"
SPECIAL_TOKENS = 256  # appended by the runner's tiktoken loader
VOCAB = len(TOKEN_CHARS) + SPECIAL_TOKENS
BOS_ID = len(TOKEN_CHARS)  # <|begin_of_text|>
EOS_ID = len(TOKEN_CHARS) + 1  # <|end_of_text|>


def write_tokenizer(path: str) -> str:
    """Writes the tiktoken file to ``path`` and returns ``path``."""
    with open(path, "w") as f:
        for rank, char in enumerate(TOKEN_CHARS):
            f.write(f"{base64.b64encode(char.encode('ascii')).decode('ascii')} {rank}\n")
    return path


def llama(
    seed: int = 0,
    *,
    vocab: int = VOCAB,
    hidden: int = 32,
    layers: int = 2,
    kv_heads: int = 2,
    bos: int = BOS_ID,
    eos: int = EOS_ID,
    pad: int | None = None,
):
    """A seeded random LlamaForCausalLM (4 query heads, MLP 64, 64 positions, untied LM head),
    float32, eval mode. With ``pad``, that id's embedding row is zero (transformers'
    ``padding_idx``)."""
    import transformers as T

    torch.manual_seed(seed)
    config = T.LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=False,
    )
    return T.LlamaForCausalLM(config).eval()


def tiny_llama(seed: int = 0):
    """A seeded random LlamaForCausalLM over the tokenizer's vocabulary (hidden 32, 2 layers,
    4 query / 2 KV heads), float32, eval mode. The output rows of the special tokens other
    than EOS are scaled down, so that greedy text is mostly the tokenizer's characters."""
    model = llama(seed)
    with torch.no_grad():
        model.lm_head.weight[len(TOKEN_CHARS) :] *= 0.1
        model.lm_head.weight[EOS_ID] *= 10
    return model


def tiny_opt_config(**fields):
    """A tiny ``transformers.OPTConfig`` (a causal LM architecture ``executorch_trt.llm`` does
    not support); ``fields`` are added to it."""
    import transformers as T

    return T.OPTConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        ffn_dim=32,
        num_attention_heads=2,
        **fields,
    )


def save_checkpoint(model, directory: str) -> str:
    """``model.save_pretrained(directory)`` (config.json + model.safetensors); returns it."""
    model.save_pretrained(directory)
    return directory


def greedy_tokens(model, prompt_ids, max_new_tokens: int, eos_ids=()) -> list:
    """Eager greedy decoding without a cache: each next token is the argmax of the plain
    model's forward over the whole sequence so far; stops after an EOS token (included)."""
    ids = list(prompt_ids)
    out = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits
            token = int(logits[0, -1].argmax())
            out.append(token)
            ids.append(token)
            if token in eos_ids:
                break
    return out


#: CountingDecoder's sizes: vocabulary, width, cache positions, longest prefill chunk.
COUNTING_VOCAB, COUNTING_DIM, COUNTING_CAPACITY, COUNTING_MAX_SEQ_LEN = 48, 16, 32, 8


class _SeededAttentionWeights(torch.nn.Module):
    """The weights CountingDecoder and its variants share, made from ``seed``: an embedding of
    COUNTING_VOCAB ids of width ``dim``, projections ``q``, ``k``, ``v`` and ``out`` (to
    logits)."""

    def __init__(self, seed: int, dim: int = COUNTING_DIM):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(COUNTING_VOCAB, dim)
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.out = torch.nn.Linear(dim, COUNTING_VOCAB)


class CountingDecoder(_SeededAttentionWeights):
    """One attention layer whose cache write position is a step counter buffer advanced by each
    call (as transformers' StaticLayer.update writes at ``cumulative_length``): a rewind that
    does not put the counter back writes the next token at the wrong position. With
    ``summary``, a buffer that is not positional also feeds the logits: the sum of the
    embeddings of every token held (restored from a snapshot, then the tokens after it run).

    ``forward(tokens [1, T] int64, positions [T] int64) -> logits [1, T, COUNTING_VOCAB]``."""

    def __init__(self, summary: bool = False):
        super().__init__(seed=3)
        dim, capacity = COUNTING_DIM, COUNTING_CAPACITY
        self.register_buffer("k_cache", torch.zeros(1, capacity, dim))
        self.register_buffer("v_cache", torch.zeros(1, capacity, dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        if summary:
            self.register_buffer("total", torch.zeros(1, dim))
        self.summary = summary
        self.capacity = capacity

    def forward(self, tokens, positions):
        x = self.embed(tokens)
        where = self.count + torch.arange(tokens.shape[1])
        self.k_cache.index_copy_(1, where, self.k(x))
        self.v_cache.index_copy_(1, where, self.v(x))
        self.count.add_(tokens.shape[1])
        scores = self.q(x) @ self.k_cache.transpose(1, 2) / 4.0
        visible = torch.arange(self.capacity)[None, :] <= positions[:, None]
        scores = scores.masked_fill(~visible[None], float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ self.v_cache
        if self.summary:
            self.total.add_(x.sum(1))
            attended = attended + self.total[:, None, :]
        return self.out(attended)


#: TransposedKeyDecoder's sizes: its width and its cache positions are the same.
TRANSPOSED_DIM = TRANSPOSED_CAPACITY = 16


class TransposedKeyDecoder(_SeededAttentionWeights):
    """CountingDecoder's attention with its key cache stored transposed, ``k_cache [1, D, S]``
    (the layout a ``q @ K`` without a transpose reads), its value cache as ``[1, S, D]``, and
    ``D == S == 16``: both caches have two dimensions of the capacity, and only running a token
    tells which one is the position (``k_cache``'s last, ``v_cache``'s middle). Export it with
    ``export_counting(False, TransposedKeyDecoder(), get_max_context_len=TRANSPOSED_CAPACITY)``.

    ``forward(tokens [1, T] int64, positions [T] int64) -> logits [1, T, COUNTING_VOCAB]``."""

    def __init__(self):
        super().__init__(seed=5, dim=TRANSPOSED_DIM)
        dim, capacity = TRANSPOSED_DIM, TRANSPOSED_CAPACITY
        self.register_buffer("k_cache", torch.zeros(1, dim, capacity))
        self.register_buffer("v_cache", torch.zeros(1, capacity, dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.capacity = capacity

    def forward(self, tokens, positions):
        x = self.embed(tokens)
        where = self.count + torch.arange(tokens.shape[1])
        self.k_cache.index_copy_(2, where, self.k(x).transpose(1, 2))
        self.v_cache.index_copy_(1, where, self.v(x))
        self.count.add_(tokens.shape[1])
        scores = self.q(x) @ self.k_cache / 4.0
        visible = torch.arange(self.capacity)[None, :] <= positions[:, None]
        scores = scores.masked_fill(~visible[None], float("-inf"))
        return self.out(torch.softmax(scores, dim=-1) @ self.v_cache)


#: MisleadingStateDecoder's cache positions: as many as CountingDecoder's vocabulary, so a
#: table indexed by token id has the shape of a buffer indexed by position.
MISLEADING_CAPACITY = COUNTING_VOCAB


class MisleadingStateDecoder(_SeededAttentionWeights):
    """CountingDecoder's attention over caches ``[1, S, D]`` written at ``positions``, plus a
    buffer ``extra`` that feeds the logits and has the shape of a KV cache or of a token counter
    without being one (``kind``):

    * ``"token_table"``: ``[S]`` (``S == COUNTING_VOCAB``), 1.0 at each id run (indexed by id);
    * ``"position_counts"``: ``[S]``, how many times each position was run (``index_add_``);
    * ``"token_sum"``: an int64 scalar, the sum of the ids run (the token count for some
      prompts, e.g. ``[0, 0, 0, 3, 2, 1]``);
    * ``"reversed_cache"``: no ``extra``; the caches hold position ``p`` at index ``S - 1 - p``.
    * ``"validity"``: ``[S]``, 1.0 at each position run; attention sees every entry it marks
      (and, within a call, the causal ones): it reads past its position, so a rewind must
      reset the dropped positions' marks. A buffer ``total`` (``[1, D]``, the sum of the
      attention outputs so far, added to them) is restored from a snapshot on a rewind, and
      the tokens after it run again: they must not see their own old marks either.

    Export it with ``export_counting(False, MisleadingStateDecoder(kind),
    get_max_context_len=MISLEADING_CAPACITY)``.

    ``forward(tokens [1, T] int64, positions [T] int64) -> logits [1, T, COUNTING_VOCAB]``."""

    def __init__(self, kind: str):
        super().__init__(seed=7)
        dim, capacity = COUNTING_DIM, MISLEADING_CAPACITY
        self.w = torch.nn.Parameter(torch.randn(COUNTING_VOCAB))
        self.register_buffer("k_cache", torch.zeros(1, capacity, dim))
        self.register_buffer("v_cache", torch.zeros(1, capacity, dim))
        if kind in ("token_table", "position_counts", "validity"):
            self.register_buffer("extra", torch.zeros(capacity))
        elif kind == "token_sum":
            self.register_buffer("extra", torch.zeros((), dtype=torch.long))
        elif kind != "reversed_cache":
            raise ValueError(f"unknown kind {kind!r}")
        if kind == "validity":
            self.register_buffer("total", torch.zeros(1, dim))
        self.kind, self.capacity = kind, capacity

    def forward(self, tokens, positions):
        x = self.embed(tokens)
        reversed_cache = self.kind == "reversed_cache"
        where = self.capacity - 1 - positions if reversed_cache else positions
        self.k_cache.index_copy_(1, where, self.k(x))
        self.v_cache.index_copy_(1, where, self.v(x))
        index = torch.arange(self.capacity)[None, :]
        visible = index >= where[:, None] if reversed_cache else index <= positions[:, None]
        if self.kind == "validity":
            in_call = (index >= positions[0]) & (index <= positions[-1])
            marked = (self.extra[None, :] > 0.5) & ~in_call
            visible = marked | (in_call & visible)
            self.extra.index_copy_(0, positions, torch.ones(positions.shape[0]))
        scores = (self.q(x) @ self.k_cache.transpose(1, 2) / 4.0).masked_fill(
            ~visible[None], float("-inf")
        )
        attended = torch.softmax(scores, dim=-1) @ self.v_cache
        if self.kind == "validity":
            self.total.add_(attended.sum(1))
            attended = attended + self.total[:, None, :]
        logits = self.out(attended)
        if self.kind == "token_table":
            self.extra.index_copy_(0, tokens[0], torch.ones(tokens.shape[1]))
            logits = logits + self.extra * self.w
        elif self.kind == "position_counts":
            self.extra.index_add_(0, positions, torch.ones(positions.shape[0]))
            logits = logits + self.extra[positions][None, :, None] * self.w
        elif self.kind == "token_sum":
            self.extra.add_(tokens.sum())
            logits = logits + self.extra.float() * self.w * 0.1
        return logits


def export_counting(summary: bool, module=None, **metadata):
    """``module`` (default ``CountingDecoder(summary)``) exported by ``executorch_trt.export``
    as one dynamic ``forward`` (T in [1, COUNTING_MAX_SEQ_LEN]) with ExecuTorch's LLM metadata
    methods (``metadata`` adds to or overrides them, e.g. ``get_eos_ids=[5]``); returns the
    ExecutorchProgramManager (``.buffer`` is the .pte)."""
    import executorch_trt

    module = (module or CountingDecoder(summary=summary)).eval()
    t = torch.export.Dim("T", min=1, max=COUNTING_MAX_SEQ_LEN)
    with torch.no_grad():
        ep = torch.export.export(
            module,
            (torch.zeros(1, 3, dtype=torch.long), torch.arange(3)),
            dynamic_shapes=({1: t}, {0: t}),
        )
    methods = {
        "get_max_seq_len": COUNTING_MAX_SEQ_LEN,
        "get_max_context_len": COUNTING_CAPACITY,
        "get_vocab_size": COUNTING_VOCAB,
        "enable_dynamic_shape": True,
        **metadata,
    }
    return executorch_trt.export(ep, constant_methods=methods)
