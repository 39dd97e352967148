"""Generates an LLM program whose key cache is stored transposed, for the C++ session test.

The model is the Python session tests' TransposedKeyDecoder (tests/py/llm_test_models.py):
`k_cache [1, 16, 16]` written along its last dimension (`[1, D, S]`), `v_cache [1, 16, 16]`
along its middle one (`[1, S, D]`), `count` a step counter; one dynamic `forward` with
ExecuTorch's LLM metadata methods, `get_max_context_len` 16. Both caches have two dimensions of
the capacity, so only running a token tells which one is the position
(extension/llm/state_layout.h).

Usage: python make_transposed_llm_testdata.py --pte PATH
"""

import argparse

import llm_test_models as M


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pte", required=True)
    args = parser.parse_args()
    program = M.export_counting(
        False, M.TransposedKeyDecoder(), get_max_context_len=M.TRANSPOSED_CAPACITY
    )
    with open(args.pte, "wb") as f:
        f.write(program.buffer)


if __name__ == "__main__":
    main()
