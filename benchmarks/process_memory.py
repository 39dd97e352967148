"""The memory a process and the processes it forks hold together, sampled (Linux).

An export builds its partitions in forked worker processes (`backend/partition_builds.py`), so
the exporting process's own peak RSS leaves them out, and a worker's RSS counts the pages it
still shares with its parent. The proportional set size (`Pss` of `/proc/PID/smaps_rollup`)
splits each shared page among the processes that map it, so the sum over the process tree is
what the tree holds. `PeakTreePss` samples that sum in a thread while its block runs, and only
while the process has children: reading `smaps_rollup` walks the process's page tables (about
20 ms for 3 GiB) and holds its memory map's lock, so sampling a lone exporting process every
half second made its export 4-7% slower.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType


class PeakTreePss:
    """``with PeakTreePss() as m: ...`` then ``m.peak_mib`` (MiB): the larger of this process's
    own peak RSS (the kernel's high-water mark, ``VmHWM``: exact, over the process's life) and
    the largest sum of ``Pss`` over this process and its descendants seen every ``interval_s``
    seconds while it has descendants (0 where /proc has neither). Alone, a process's Pss is
    at most its RSS, so its high-water mark bounds every moment without children."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-tree-pss", daemon=True)

    def __enter__(self) -> PeakTreePss:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.peak_mib = max(self.peak_mib, _high_water_rss_kib(os.getpid()) / 1024)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        pid = os.getpid()
        if _children(pid):
            self.peak_mib = max(self.peak_mib, tree_pss_kib(pid) / 1024)


def tree_pss_kib(pid: int) -> int:
    """The sum of ``Pss`` (KiB) over ``pid`` and its descendants; a process that ends while it
    is read counts 0."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        total += _pss_kib(current)
        pending.extend(_children(current))
    return total


def _pss_kib(pid: int) -> int:
    return _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def _high_water_rss_kib(pid: int) -> int:
    return _proc_kib(f"/proc/{pid}/status", "VmHWM:")


def _proc_kib(path: str, field: str) -> int:
    """The KiB of the line starting with ``field`` in a /proc file; 0 where there is none."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return children
