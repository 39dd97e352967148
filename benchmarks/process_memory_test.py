"""`process_memory`: a forked child's own pages count once, in the tree's Pss; a process
without children is not sampled (its high-water mark counts instead)."""

import multiprocessing
import os
import time
import unittest.mock

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

    def test_a_process_without_children_is_not_sampled(self):
        pss_reads = []
        read = process_memory._pss_kib

        def counting(pid: int) -> int:
            pss_reads.append(pid)
            return read(pid)

        with (
            unittest.mock.patch.object(process_memory, "_pss_kib", counting),
            process_memory.PeakTreePss(interval_s=0.01) as memory,
        ):
            block = bytearray(b"\1" * (CHILD_MIB << 20))
            time.sleep(0.2)
        # Reading Pss walks the page tables (slowing the process measured): none was read.
        self.assertEqual(pss_reads, [])
        self.assertGreaterEqual(memory.peak_mib, _rss_mib())
        self.assertGreater(memory.peak_mib, CHILD_MIB)
        del block


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


if __name__ == "__main__":
    absltest.main()
