"""Generates an LLM program in the `forward` form with metadata methods, for the C++ session test.

The example's program (//examples:kv_cache_decode_program) is `prefill`/`decode` without
metadata and its only non-positional buffers are step counters. This one covers the rest of
what extension/llm reads and does: one dynamic `forward(tokens[1, T], positions[T])`
(T in [1, 8]), ExecuTorch's LLM metadata methods (`get_max_seq_len` 8, `get_max_context_len`
32, `get_vocab_size` 48, `enable_dynamic_shape`, `get_bos_id`, `get_eos_ids`), and two
non-positional buffers: `count`, a step counter (where the next token is written, as
transformers' `cumulative_length`), and `total`, the sum of the embeddings of every token held,
which feeds the logits and is not a counter (a rewind restores it from a snapshot and runs the
tokens after the snapshot again). The model is the Python session tests' CountingDecoder with
`summary=True` (tests/py/llm_test_models.py), seeded.

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

import llm_test_models as M

BOS_ID = 1
PROMPT = [BOS_ID, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]  # longer than max_seq_len: two chunks
STEPS = 12


def greedy(module, prompt, steps):
    """Eager greedy tokens: the prompt in chunks of max_seq_len, then one token per call."""
    module = copy.deepcopy(module)
    held = 0
    with torch.no_grad():
        for start in range(0, len(prompt), M.COUNTING_MAX_SEQ_LEN):
            chunk = prompt[start : start + M.COUNTING_MAX_SEQ_LEN]
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
    module = M.CountingDecoder(summary=True).eval()
    tokens = greedy(module, PROMPT, STEPS)
    stop_index = next(i for i in range(2, STEPS) if tokens[i] not in tokens[:i])
    eos = tokens[stop_index]
    program = M.export_counting(True, module, get_bos_id=BOS_ID, get_eos_ids=[eos])
    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    with open(args.reference, "w") as f:
        json.dump(
            {
                "prompt": PROMPT,
                "greedy": tokens,
                "max_seq_len": M.COUNTING_MAX_SEQ_LEN,
                "max_context_len": M.COUNTING_CAPACITY,
                "vocab_size": M.COUNTING_VOCAB,
                "bos_id": BOS_ID,
                "eos_ids": [eos],
                "stop_index": stop_index,
            },
            f,
        )


if __name__ == "__main__":
    main()
