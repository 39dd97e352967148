"""Generates an LLM program in the `forward` form with metadata methods, for the C++ session test.

The example's program (//examples:kv_cache_decode_program) is `prefill`/`decode` without
metadata and its only non-positional buffers are step counters. This one covers the rest of
what extension/llm reads and does: one dynamic `forward(tokens[1, T], positions[T])`
(T in [1, 8]), ExecuTorch's LLM metadata methods (`get_max_seq_len` 8, `get_max_context_len`
32, `get_vocab_size` 48, `enable_dynamic_shape`, `get_bos_id`, `get_eos_ids`), and two
non-positional buffers: `count`, a step counter (where the next token is written, as
transformers' `cumulative_length`), and `total`, the sum of the embeddings of every token held,
which feeds the logits and is not a counter (a rewind restores it from a snapshot and runs the
tokens after the snapshot again). The model is executorch_trt.llm's tests' CountingDecoder with
`summary=True` (tests/py/llm_session_test.py), seeded.

Writes --pte and --reference, a JSON of the eager model's greedy continuation of a prompt:
    {"prompt": [...], "greedy": [12 ids], "max_seq_len", "max_context_len", "vocab_size",
     "bos_id", "eos_ids": [id], "stop_index": i}
where `eos_ids` is a greedy token that first appears at `stop_index` (>= 2), so that generating
with the program's stop tokens ends there.

Usage: python make_llm_testdata.py --pte PATH --reference PATH
"""

import argparse
import copy
import json

import torch

import executorch_trt

VOCAB = 48
DIM = 16
CAPACITY = 32
MAX_SEQ_LEN = 8
BOS_ID = 1
PROMPT = [BOS_ID, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]  # longer than MAX_SEQ_LEN: two chunks
STEPS = 12


class CountingDecoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.q, self.k, self.v = (torch.nn.Linear(DIM, DIM) for _ in range(3))
        self.out = torch.nn.Linear(DIM, VOCAB)
        self.register_buffer("k_cache", torch.zeros(1, CAPACITY, DIM))
        self.register_buffer("v_cache", torch.zeros(1, CAPACITY, DIM))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("total", torch.zeros(1, DIM))

    def forward(self, tokens, positions):
        x = self.embed(tokens)
        where = self.count + torch.arange(tokens.shape[1])
        self.k_cache.index_copy_(1, where, self.k(x))
        self.v_cache.index_copy_(1, where, self.v(x))
        self.count.add_(tokens.shape[1])
        scores = self.q(x) @ self.k_cache.transpose(1, 2) / 4.0
        visible = torch.arange(CAPACITY)[None, :] <= positions[:, None]
        scores = scores.masked_fill(~visible[None], float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ self.v_cache
        self.total.add_(x.sum(1))
        attended = attended + self.total[:, None, :]
        return self.out(attended)


def greedy(module, prompt, steps):
    """Eager greedy tokens: the prompt in chunks of MAX_SEQ_LEN, then one token per call."""
    module = copy.deepcopy(module)
    held = 0
    with torch.no_grad():
        for start in range(0, len(prompt), MAX_SEQ_LEN):
            chunk = prompt[start : start + MAX_SEQ_LEN]
            logits = module(torch.tensor([chunk]), torch.arange(held, held + len(chunk)))
            held += len(chunk)
        tokens = []
        for _ in range(steps):
            token = int(torch.argmax(logits[0, -1]))
            tokens.append(token)
            logits = module(torch.tensor([[token]]), torch.tensor([held]))
            held += 1
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pte", required=True)
    parser.add_argument("--reference", required=True)
    args = parser.parse_args()
    module = CountingDecoder().eval()
    tokens = greedy(module, PROMPT, STEPS)
    stop_index = next(i for i in range(2, STEPS) if tokens[i] not in tokens[:i])
    eos = tokens[stop_index]
    t = torch.export.Dim("T", min=1, max=MAX_SEQ_LEN)
    with torch.no_grad():
        ep = torch.export.export(
            module,
            (torch.zeros(1, 3, dtype=torch.long), torch.arange(3)),
            dynamic_shapes=({1: t}, {0: t}),
        )
    program = executorch_trt.export(
        ep,
        constant_methods={
            "get_max_seq_len": MAX_SEQ_LEN,
            "get_max_context_len": CAPACITY,
            "get_vocab_size": VOCAB,
            "enable_dynamic_shape": True,
            "get_bos_id": BOS_ID,
            "get_eos_ids": [eos],
        },
    )
    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    with open(args.reference, "w") as f:
        json.dump(
            {
                "prompt": PROMPT,
                "greedy": tokens,
                "max_seq_len": MAX_SEQ_LEN,
                "max_context_len": CAPACITY,
                "vocab_size": VOCAB,
                "bos_id": BOS_ID,
                "eos_ids": [eos],
                "stop_index": stop_index,
            },
            f,
        )


if __name__ == "__main__":
    main()
