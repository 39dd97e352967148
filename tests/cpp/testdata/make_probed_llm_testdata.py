"""Generates LLM programs whose buffers only running tokens can classify, for the C++ session
test (extension/llm/state_layout.h).

The models are the Python session tests' (tests/py/llm_test_models.py), each one dynamic
`forward` with ExecuTorch's LLM metadata methods:
- `--transposed`: TransposedKeyDecoder, `k_cache [1, 16, 16]` written along its last dimension
  (`[1, D, S]`), `v_cache [1, 16, 16]` along its middle one, `count` a step counter; 16
  positions. Both caches have two dimensions of the capacity.
- `--position_counts`: MisleadingStateDecoder("position_counts"), KV caches `[1, 48, 16]` and
  `extra [48]`, how many times each position was run (an accumulating write at the position).
- `--token_sum`: MisleadingStateDecoder("token_sum"), `extra` an int64 scalar holding the sum
  of the ids run (the token count for some prompts, but not a counter).
- `--validity`: MisleadingStateDecoder("validity"), `extra [48]` marks the positions run and
  attention sees every marked entry: it reads past its position after a rewind.
- `--padding_id`: a tiny transformers Llama (executorch_trt.llm.export_llm, 16 positions) whose
  padding id is 2, the first probe token: its embedding row is zero, so it writes zeros into
  the zero caches and the next token set must decide.

Usage: python make_probed_llm_testdata.py --transposed PATH --position_counts PATH
       --token_sum PATH --validity PATH --padding_id PATH
"""

import argparse

import llm_test_models as M
from executorch_trt import llm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--transposed", "--position_counts", "--token_sum", "--validity", "--padding_id"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    programs = {
        args.transposed: (M.TransposedKeyDecoder(), M.TRANSPOSED_CAPACITY),
        args.position_counts: (
            M.MisleadingStateDecoder("position_counts"),
            M.MISLEADING_CAPACITY,
        ),
        args.token_sum: (M.MisleadingStateDecoder("token_sum"), M.MISLEADING_CAPACITY),
        args.validity: (M.MisleadingStateDecoder("validity"), M.MISLEADING_CAPACITY),
    }
    for path, (module, capacity) in programs.items():
        program = M.export_counting(False, module, get_max_context_len=capacity)
        with open(path, "wb") as f:
            f.write(program.buffer)
    with open(args.padding_id, "wb") as f:
        f.write(llm.export_llm(M.llama(pad=2), 4, max_context_len=16).buffer)


if __name__ == "__main__":
    main()
