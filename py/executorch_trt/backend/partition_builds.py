"""Building the engine payloads of a lowering's partitions, side by side when the machine can.

ExecuTorch hands a backend every partition of every method at once
(``BackendDetails.preprocess_multimethod``). A portable engine's build is single-threaded
Python (re-traces of the nested program, XNNPACK's passes per subgraph), so with several
partitions and several CPUs each partition builds in a worker process of its own: the two
methods of a prefill/decode program take the time of the longer one, not of both.

Each partition builds in a forked process of its own: it inherits the partition, and only
its payload (or its error) is pickled back, through a pipe of its own. A
forked process must not enter torch's OpenMP thread pool (it would wait forever for threads
that stayed in the parent), so every build runs with one torch thread, in a worker and in
the calling process alike: the same payload bytes whichever way, and on any number of cores.

``EXECUTORCH_TRT_BUILD_WORKERS=N`` caps the workers (default: the CPUs this process may run
on); ``1`` builds every partition in the calling process (less memory at once). Set it to 1
where the exporting process runs other threads that may hold a lock while it forks (a fork
copies only the forking thread; a lock held by another one stays held in the worker).

Lowerings from several threads of one process build one after the other (``_LOCK``): torch's
thread count, which every build sets, is process-wide.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import pickle
import re
import signal
import threading
import traceback
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import cast

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

#: Reentrant: a build that itself lowers a program, in this thread, does not wait for itself.
_LOCK = threading.RLock()
_IN_WORKER = False
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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
    # One forked process per job, at most ``workers`` at once, each sending its one result back
    # through a pipe of its own: a worker stopped while it sends (a failed build elsewhere,
    # Ctrl-C) leaves nothing half-read that another result would wait behind, and a worker that
    # dies is seen as the end of its pipe. (ProcessPoolExecutor shares one result pipe between
    # its workers: stopping one mid-send blocks the pool's reader, and its shutdown, forever.)
    context = multiprocessing.get_context("fork")
    queued = list(range(len(jobs)))
    running: dict[Connection, tuple[int, BaseProcess]] = {}
    results: dict[int, EnginePayload] = {}
    failures: dict[int, BaseException] = {}
    try:
        while queued or running:
            while queued and len(running) < workers:
                index = queued.pop(0)
                reader, writer = context.Pipe(duplex=False)
                worker: BaseProcess = context.Process(
                    target=_worker, args=(jobs[index], writer, os.getpid()), daemon=True
                )
                worker.start()
                writer.close()  # the worker's end: the pipe ends when the worker does
                running[reader] = (index, worker)
            for ready in wait(list(running)):
                done = cast(Connection, ready)
                index, worker = running.pop(done)
                outcome = _receive(done, worker, jobs[index])
                if isinstance(outcome, BaseException):
                    failures[index] = outcome
                else:
                    results[index] = outcome
            if failures:
                # Only a build before the first failure can still change which error is
                # raised (the first in order, as in process); the later ones stop now.
                first = min(failures)
                queued.clear()
                for reader, (index, process) in list(running.items()):
                    if index > first:
                        _stop(reader, process)
                        del running[reader]
    finally:
        for reader, (_, process) in running.items():  # interrupted (Ctrl-C): stop them all
            _stop(reader, process)
    if failures:
        raise failures[min(failures)]
    return [results[index] for index in range(len(jobs))]


def _worker(job: BuildJob, writer: Connection, parent: int) -> None:
    # Forked: ``job`` is the parent's object, not a pickled copy.
    global _LOCK, _IN_WORKER
    _die_with(parent)
    _LOCK = threading.RLock()  # held by the parent's thread, which did not come along
    _IN_WORKER = True  # a lowering inside this build builds in process: no workers of workers
    outcome: EnginePayload | BaseException
    try:
        outcome = _build(job)
    except BaseException as e:  # noqa: BLE001 (Ctrl-C in a worker, too, goes to the caller)
        outcome = e if _survives_pickling(e) else _passed_on(e, job)
        outcome.add_note(f"raised in the worker process building {job.where}:\n" + _trace(e))
    try:
        writer.send(outcome)  # pickled whole before any byte is written
    except Exception as e:  # noqa: BLE001 (whatever pickling the result raises)
        writer.send(
            RuntimeError(
                f"TensorRTBackend: the result of building {job.where} cannot be sent back from "
                f"the worker process ({_text(e)}); {WORKERS_VARIABLE}=1 builds in this process"
            )
        )
    writer.close()


def _die_with(parent: int) -> None:
    # A worker must not outlive the export: if the exporting process is killed (SIGTERM,
    # SIGKILL), the kernel kills its workers too (Linux's PR_SET_PDEATHSIG).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def _receive(
    reader: Connection, process: BaseProcess, job: BuildJob
) -> EnginePayload | BaseException:
    try:
        outcome: EnginePayload | BaseException = reader.recv()
    except EOFError:
        reader.close()
        process.join()
        return RuntimeError(
            f"TensorRTBackend: the worker process building {job.where} ended without a "
            f"result (exit code {process.exitcode}); the machine may have run out of memory. "
            f"Set {WORKERS_VARIABLE}=1 to build the partitions one at a time in this process"
        )
    except BaseException:
        _stop(reader, process)  # interrupted while reading (Ctrl-C): not waiting for it
        raise
    reader.close()
    process.join()  # it exits once its result is sent
    return outcome


def _stop(reader: Connection, process: BaseProcess) -> None:
    process.kill()  # not SIGTERM: a handler the worker inherited could ignore it
    process.join()
    reader.close()


def _worker_count(jobs: Sequence[BuildJob]) -> int:
    limit = _worker_limit()  # checked even where one job needs no workers
    if _IN_WORKER or len(jobs) < 2 or not all(job.engine.builds_in_worker for job in jobs):
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(len(jobs), limit)


def _worker_limit() -> int:
    text = os.environ.get(WORKERS_VARIABLE)
    if text is None:
        return len(os.sched_getaffinity(0))
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise ValueError(
            f"{WORKERS_VARIABLE}={text!r}: expected a whole number >= 1 in decimal digits (the "
            "most worker processes that build partitions at once; 1 builds them in this process)"
        )
    return int(text)


def _passed_on(error: BaseException, job: BuildJob) -> RuntimeError:
    # An exception that does not pickle back (one whose __init__ takes other arguments than
    # its message, as some of torch's do) would reach the caller as a dead worker: its type and
    # message are kept in a RuntimeError.
    return RuntimeError(
        f"TensorRTBackend: building {job.where} raised {type(error).__module__}."
        f"{type(error).__qualname__}: {_text(error)} (passed on as RuntimeError: the exception "
        f"cannot be sent back from the worker process; {WORKERS_VARIABLE}=1 builds in this "
        "process and raises it as it is)"
    )


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception as e:  # noqa: BLE001 (a broken __str__ must not hide the error)
        return f"<str() of the exception raised {type(e).__name__}>"


def _trace(error: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(error))
    except Exception:  # noqa: BLE001 (as _text)
        return f"{type(error).__qualname__}: {_text(error)}"


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
