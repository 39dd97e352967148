"""`process_memory`: a forked child's own pages count once, in the tree's Pss."""

import multiprocessing
import os

from absl.testing import absltest

from benchmarks import process_memory

CHILD_MIB = 256


def _hold(ready, done) -> None:
    block = bytearray(b"\1" * (CHILD_MIB << 20))  # written: the child's own pages
    ready.set()
    done.wait(60)
    del block


class ProcessMemoryTest(absltest.TestCase):
    def test_a_childs_pages_count_in_the_tree(self):
        context = multiprocessing.get_context("fork")
        ready, done = context.Event(), context.Event()
        before = process_memory.tree_pss_kib(os.getpid()) / 1024
        with process_memory.PeakTreePss(interval_s=0.05) as memory:
            child = context.Process(target=_hold, args=(ready, done))
            child.start()
            self.assertTrue(ready.wait(60))
            during = process_memory.tree_pss_kib(os.getpid()) / 1024
            done.set()
            child.join(60)
        self.assertGreater(during - before, 0.9 * CHILD_MIB)
        self.assertLess(during - before, 2 * CHILD_MIB)
        self.assertGreaterEqual(memory.peak_mib, during * 0.99)
        self.assertEqual(process_memory.tree_pss_kib(-1), 0)  # no such process: 0, no error


if __name__ == "__main__":
    absltest.main()
