"""Exports a small program with control flow and both kinds of copy kernel, for plan_copies_test.

`forward(xs[5, 3], y[3])` maps `x + y` over the rows of `xs` with `torch.map` (ExecuTorch emits
a loop: `JumpFalseCall`, and `executorch_prim::et_copy_index` copying each row's result into
the output), then adds the column sums into each row of a registered buffer `state[2, 3]` in
place, which ExecuTorch writes back with `aten::copy_`. Plain ExecuTorch (no delegate), buffer
names emitted.

usage: export_map_program.py --pte OUT.pte
"""

import argparse
import sys

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from torch._higher_order_ops.map import map as map_rows


class MapThenAccumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(2, 3))

    def forward(self, xs, y):
        out = map_rows(lambda x, y: x + y, xs, y)
        self.state.add_(out.sum(0, keepdim=True))
        return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pte", required=True)
    args = p.parse_args(argv)
    with torch.no_grad():
        ep = torch.export.export(MapThenAccumulate().eval(), (torch.randn(5, 3), torch.randn(3)))
        program = to_edge(ep).to_executorch(ExecutorchBackendConfig(emit_mutable_buffer_names=True))
    with open(args.pte, "wb") as f:
        f.write(program.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
