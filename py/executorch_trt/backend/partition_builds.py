"""Building the engine payloads of a lowering's partitions, side by side when the machine can.

ExecuTorch hands a backend every partition of every method at once
(``BackendDetails.preprocess_multimethod``). A portable engine's build is single-threaded
Python (re-traces of the nested program, XNNPACK's passes per subgraph), so with several
partitions and several CPUs each partition builds in a worker process of its own: the two
methods of a prefill/decode program take the time of the longer one, not of both.

Workers are forked: they inherit the partitions, and only the payloads are pickled back. A
forked process must not enter torch's OpenMP thread pool (it would wait forever for threads
that stayed in the parent), so every build runs with one torch thread, in a worker and in
the calling process alike: the same payload bytes whichever way, and on any number of cores.

``EXECUTORCH_TRT_BUILD_WORKERS=N`` caps the workers (default: the CPUs this process may run
on); ``1`` builds every partition in the calling process (less memory at once). Set it to 1
where the exporting process runs other threads that may hold a lock while it forks (a fork
copies only the forking thread; a lock held by another one stays held in the worker).

Lowerings from several threads of one process build one after the other (``_LOCK``): the jobs
forked workers read and torch's thread count are process-wide.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import pickle
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import torch
from torch.export import ExportedProgram

from executorch_trt.engines.base import Engine, EnginePayload
from executorch_trt.format.blob import AliasedIO
from executorch_trt.options import CompileOptions


@dataclasses.dataclass(frozen=True)
class BuildJob:
    """One partition to build: ``engine.build(partition, aliases, options)``; ``where`` names
    it in messages (``"method 'decode', partition 0"``)."""

    engine: Engine
    partition: ExportedProgram
    aliases: tuple[AliasedIO, ...]
    options: CompileOptions
    where: str


#: The environment variable that caps the worker processes (module docstring).
WORKERS_VARIABLE = "EXECUTORCH_TRT_BUILD_WORKERS"

#: The jobs forked workers build, by index (set only while a pool runs; a fork inherits it).
_JOBS: Sequence[BuildJob] = ()
_LOCK = threading.Lock()


def build_all(jobs: Sequence[BuildJob]) -> list[EnginePayload]:
    """The payload of each job, in order.

    In worker processes (at most one per CPU this process may run on, or
    ``EXECUTORCH_TRT_BUILD_WORKERS``) when there are two jobs or more, each job's engine allows
    it (``Engine.builds_in_worker``) and the platform can fork; in this process otherwise.
    Raises what the first failing job's ``build`` raised (its type and message; a
    ``RuntimeError`` naming them where that exception cannot be pickled back from a worker),
    after stopping the builds still running (as on ``KeyboardInterrupt``);
    ``RuntimeError`` naming the partition when a worker ended without a result (killed, e.g.
    out of memory); ``ValueError`` when ``EXECUTORCH_TRT_BUILD_WORKERS`` is not a whole number
    >= 1.
    """
    workers = _worker_count(jobs)
    with _LOCK:
        if workers < 2:
            return [_build(job) for job in jobs]
        return _build_in_workers(jobs, workers)


def _build_in_workers(jobs: Sequence[BuildJob], workers: int) -> list[EnginePayload]:
    global _JOBS
    _JOBS = jobs
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    try:
        futures = [pool.submit(_build_job, index) for index in range(len(jobs))]
        return [_result(future, job) for future, job in zip(futures, jobs)]
    except BaseException:
        # A build failed or the caller was interrupted (Ctrl-C): no other result is needed, so
        # the builds still running or queued stop now instead of running to their end.
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _JOBS = ()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    # Python 3.14 has ProcessPoolExecutor.terminate_workers(); before it, the pool's processes
    # are only in ``_processes``. Once they are gone the pool counts itself broken, fails what
    # was still queued, and its shutdown returns at once.
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()


def _worker_count(jobs: Sequence[BuildJob]) -> int:
    if len(jobs) < 2 or not all(job.engine.builds_in_worker for job in jobs):
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(len(jobs), _worker_limit())


def _worker_limit() -> int:
    text = os.environ.get(WORKERS_VARIABLE)
    if text is None:
        return len(os.sched_getaffinity(0))
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ValueError(
            f"{WORKERS_VARIABLE}={text!r}: expected a whole number >= 1 (the most worker "
            "processes that build partitions at once; 1 builds them in this process)"
        )
    return limit


def _build_job(index: int) -> EnginePayload:
    job = _JOBS[index]
    try:
        return _build(job)
    except Exception as e:
        if _survives_pickling(e):
            raise
        # The pool would lose it: an exception that does not pickle back (one whose __init__
        # takes other arguments than its message, as some of torch's do) reaches the parent as a
        # dead worker. Its type and message are kept; its traceback is chained.
        raise RuntimeError(
            f"TensorRTBackend: building {job.where} raised {type(e).__module__}."
            f"{type(e).__qualname__}: {e} (passed on as RuntimeError: the exception cannot be "
            f"sent back from the worker process; {WORKERS_VARIABLE}=1 builds in this process "
            "and raises it as it is)"
        ) from e


def _survives_pickling(error: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 (any __reduce__ or __init__ may raise anything)
        return False
    return True


def _build(job: BuildJob) -> EnginePayload:
    with _one_torch_thread(), torch.no_grad():
        return job.engine.build(job.partition, job.aliases, job.options)


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _result(future: Future[EnginePayload], job: BuildJob) -> EnginePayload:
    try:
        return future.result()
    except BrokenProcessPool as e:
        raise RuntimeError(
            f"TensorRTBackend: the worker process building {job.where} ended without a "
            f"result ({e}); the machine may have run out of memory. Set "
            f"{WORKERS_VARIABLE}=1 to build the partitions one at a time in this process"
        ) from e
