"""Exports small programs whose delegates plan_delegates_test reads: the same stateless model
(`forward(x[2, 8]) = relu(linear(x)) * 2`) as

* `--inline`: through the delegate (portable engine, nested XNNPACK), finalised with
  `extract_delegate_segments=False`: the blob is stored inline in the program flatbuffer
  (`backend_delegate_data`) instead of in a segment after it (ExecuTorch's default);
* `--no-xnnpack`: through the delegate with `portable_xnnpack=False` (the nested program runs
  on ExecuTorch's CPU kernels only), blob in a segment;
* `--xnnpack`: plain ExecuTorch lowered with `XnnpackPartitioner` (an `XnnpackBackend`
  delegate, no TensorRTBackend);
* `--plain`: plain ExecuTorch, no delegate.

usage: export_delegate_forms.py --inline A.pte --no-xnnpack B.pte --xnnpack C.pte --plain D.pte
"""

import argparse
import sys

import torch
from executorch.exir import to_edge, to_edge_transform_and_lower

import executorch_trt


class LinearRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for flag in ("--inline", "--no-xnnpack", "--xnnpack", "--plain"):
        p.add_argument(flag, required=True)
    args = p.parse_args(argv)
    with torch.no_grad():
        ep = torch.export.export(LinearRelu().eval(), (torch.randn(2, 8),))
        config = executorch_trt.backend_config()
        config.extract_delegate_segments = False
        programs = {
            args.inline: to_edge_transform_and_lower(
                ep, partitioner=[executorch_trt.TensorRTPartitioner()]
            ).to_executorch(config),
            args.no_xnnpack: executorch_trt.export(ep, portable_xnnpack=False),
            args.plain: to_edge(ep).to_executorch(),
        }
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        programs[args.xnnpack] = to_edge_transform_and_lower(
            ep, partitioner=[XnnpackPartitioner()]
        ).to_executorch()
    for path, program in programs.items():
        with open(path, "wb") as f:
            f.write(program.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
