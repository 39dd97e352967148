"""The machine a benchmark ran on: CPU model and thread counts, for the table header."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else `platform.processor()`, else "unknown"."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cpus() -> int:
    """CPUs this process may run on (affinity), else `os.cpu_count()`."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def describe(threads: int) -> dict:
    """{"cpu", "cpus", "threads", "load_average", "platform", "python", "torch",
    "executorch"}; `load_average` (1-minute) says whether something else was running."""
    import sys

    import torch

    try:
        from importlib.metadata import version

        et_version = version("executorch")
    except Exception:  # noqa: BLE001 - informational only
        et_version = "unknown"
    return {
        "cpu": cpu_model(),
        "cpus": usable_cpus(),
        "threads": threads,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "executorch": et_version,
    }
