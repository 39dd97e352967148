"""Generates the test data for the C++ dynamic-shape test, with executorch_trt.

Unlike make_kv_testdata.py (which writes its blob by hand so the C++ readers are tested
against the format document, not the Python writer), this exports through the package: the
test checks that what the exporter writes for a torch.export.Dim runs in the C++ runtime.

Writes dynamic_rows.pte: forward(x[T, 4] float32, pos[T] int64) -> (y[T, 4], total[1, 4])
with T = Dim("T", min=1, max=8) and one mutable buffer cache[8, 4] (zeros):

    v = x * 2 + 1
    cache.index_copy_(0, pos, v)      # in place, the rows at pos
    y = v * 3
    total = cache.sum(0, keepdim=True)

Usage: python make_dynamic_testdata.py --pte PATH
"""

import argparse

import torch

import executorch_trt

MAX_ROWS = 8


class RowsIntoCache(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(MAX_ROWS, 4))

    def forward(self, x, pos):
        v = x * 2 + 1
        self.cache.index_copy_(0, pos, v)
        return v * 3, self.cache.sum(0, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pte", required=True)
    args = parser.parse_args()
    rows = torch.export.Dim("T", min=1, max=MAX_ROWS)
    with torch.no_grad():
        ep = torch.export.export(
            RowsIntoCache(),
            (torch.ones(3, 4), torch.arange(3)),
            dynamic_shapes={"x": {0: rows}, "pos": {0: rows}},
        )
    et = executorch_trt.export(ep, require_inplace=True)
    with open(args.pte, "wb") as f:
        f.write(et.buffer)


if __name__ == "__main__":
    main()
