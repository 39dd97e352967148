"""The portable engine backs the memory its nested method's load maps (XNNPACK's packed
weights) with huge pages on Linux, unless EXECUTORCH_TRT_HUGE_PAGES=0; results are unchanged.

Each load runs in a fresh process, which reports the growth of its ``AnonHugePages``
(``/proc/self/smaps_rollup``) over the load and the outputs of one call."""

from __future__ import annotations

import json
import mmap
import os
import sys
import tempfile

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt

WIDTH = 2048  # a 2048 x 2048 float32 linear: 16 MiB of weights, packed by XNNPACK
MIB = 1 << 20

WORKER = """
import json, torch
from executorch_trt import runtime

def anon_huge_kib():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0

before = anon_huge_kib()
method = runtime.load(PTE).load_method("forward")
grown = anon_huge_kib() - before
x = torch.load(INPUTS)
print(json.dumps({"grown_kib": grown, "out": method.execute([x])[0].tolist()}))
"""


def _kernel_collapses() -> bool:
    """Whether this kernel collapses a mapping into huge pages now (MADV_COLLAPSE, Linux 6.1+,
    THP not disabled, free huge pages)."""
    if sys.platform != "linux" or not hasattr(mmap.mmap, "madvise"):
        return False
    scratch = mmap.mmap(-1, 4 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        scratch.write(b"\1" * (4 * MIB))
        scratch.madvise(25)  # MADV_COLLAPSE
        return True
    except OSError:
        return False
    finally:
        scratch.close()


@delegate_library.needs_library
class HugePagesTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not _kernel_collapses():
            raise absltest.SkipTest("this kernel does not collapse memory into huge pages now")
        torch.manual_seed(0)
        cls.model = torch.nn.Linear(WIDTH, WIDTH).eval()
        cls.x = torch.randn(4, WIDTH)
        with torch.no_grad():
            cls.eager = cls.model(cls.x)
            ep = torch.export.export(cls.model, (cls.x,))
        cls.dir = tempfile.mkdtemp()
        cls.pte = os.path.join(cls.dir, "linear.pte")
        with open(cls.pte, "wb") as f:
            f.write(executorch_trt.export(ep).buffer)
        cls.inputs = os.path.join(cls.dir, "x.pt")
        torch.save(cls.x, cls.inputs)

    def _load(self, **env: str) -> dict:
        proc = delegate_library.run_script(
            f"PTE = {self.pte!r}\nINPUTS = {self.inputs!r}\n" + WORKER,
            self.dir,
            "worker.py",
            dict(delegate_library.subprocess_env(), **env),
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        out = torch.tensor(result["out"], dtype=torch.float32)
        torch.testing.assert_close(out, self.eager, rtol=1e-4, atol=1e-4)
        return result

    def test_packed_weights_are_in_huge_pages(self):
        grown = self._load()["grown_kib"] * 1024
        # Most of the 16 MiB: the ends of the packed buffer share huge pages with other memory.
        self.assertGreaterEqual(grown, 12 * MIB)

    def test_zero_turns_it_off(self):
        grown = self._load(EXECUTORCH_TRT_HUGE_PAGES="0")["grown_kib"] * 1024
        self.assertLess(grown, 4 * MIB)


if __name__ == "__main__":
    absltest.main()
