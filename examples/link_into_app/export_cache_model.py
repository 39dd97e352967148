"""Exports the small program link_into_app runs, and what eager PyTorch gives for it.

`forward(x float32 [1, 8], pos int64 [1]) -> float32 [1, 8]` writes `proj(x)` into row `pos`
of the mutable buffer `cache` (float32 [4, 8], updated in place by the delegate) and returns
the sum of the cache's rows, so every output depends on the steps before it. Exported with
`executorch_trt.export` (one TensorRTBackend delegate; the portable engine on a machine
without TensorRT).

--expected gets one line per step, `step K: v0 v1 ... v7`, from eager PyTorch on the inputs
link_into_app.cpp feeds: step K (0..3) has pos = K and x[j] = 0.25 * (K + 1) - 0.125 * j.

usage: export_cache_model.py --pte OUT.pte --expected OUT.txt
"""

import argparse

import torch

import executorch_trt

CACHE_LEN = 4
WIDTH = 8


class CacheModel(torch.nn.Module):
    """``forward(x float32 [1, 8], pos int64 [1]) -> float32 [1, 8]``: writes ``proj(x)`` into
    row ``pos`` of the ``[4, 8]`` buffer ``cache`` and returns the sum of the cache's rows."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.register_buffer("cache", torch.zeros(CACHE_LEN, WIDTH))

    def forward(self, x, pos):
        self.cache.index_copy_(0, pos, self.proj(x))
        return self.cache.sum(0, keepdim=True)


def step_inputs(step: int):
    """The inputs link_into_app.cpp builds for `step` (keep the two in sync)."""
    x = torch.tensor([[0.25 * (step + 1) - 0.125 * j for j in range(WIDTH)]])
    return x, torch.tensor([step])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pte", required=True)
    parser.add_argument("--expected", required=True)
    args = parser.parse_args()

    with torch.no_grad():
        program = executorch_trt.export(torch.export.export(CacheModel(), step_inputs(0)))
        eager = CacheModel()
        lines = []
        for step in range(CACHE_LEN):
            out = eager(*step_inputs(step))
            lines.append(f"step {step}: " + " ".join(f"{float(v):.9g}" for v in out[0]))
    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    with open(args.expected, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
