"""`./bazelw run //tools:inspect_pte -- model.pte [--json]`: what an ExecuTorch program runs (each
delegate's backend and engine) and how it updates its state, per method (`executorch_trt.inspect`).

Prints a table (default) or JSON (`--json`, format `executorch_trt.inspect/1`) to stdout.
A relative path resolves from the directory `bazel run` was invoked in
(BUILD_WORKING_DIRECTORY), else the current directory. Exit status: 0 on success; 2 on bad
usage or a file that is missing, a directory, not a .pte, truncated or corrupted (one line on
stderr naming the file or flag and what to do).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import NoReturn

USAGE_HINT = "run with --help for usage"


class _Parser(argparse.ArgumentParser):
    """argparse, with a pointer to --help in every usage error (still exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}; {USAGE_HINT}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="inspect_pte",
        description="Per method of an ExecuTorch program (.pte): delegate calls by backend "
        "and the engine each TensorRTBackend delegate runs on (portable: the CPU; "
        "tensorrt: the GPU; the first line names the program's), "
        "operators run outside delegates, and every mutable buffer with how it is "
        "updated each call (in_place_delegate, written_back with bytes copied, "
        "in_place_kernel, read_only), plus the state bytes copied per call.",
    )
    p.add_argument(
        "program",
        metavar="PROGRAM.pte",
        help="the program file; relative paths resolve from the directory bazel run was invoked in",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (format executorch_trt.inspect/1)",
    )
    return p


def resolve(path: str) -> str:
    """`path` relative to where `bazel run` was invoked (BUILD_WORKING_DIRECTORY), else to the
    current directory; absolute paths are returned unchanged."""
    base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _quiet_import_noise() -> None:
    """torchao logs a warning per CUDA extension it cannot load and torch one about a pytree
    registration when executorch is imported; both are harmless (docs/guide/troubleshooting.md)."""
    logging.getLogger("torchao").setLevel(logging.ERROR)
    logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    """Runs the tool on `argv` (default `sys.argv[1:]`); returns the exit status (usage errors
    exit 2 through argparse's `SystemExit`)."""
    args = _parser().parse_args(argv)
    path = resolve(args.program)
    _quiet_import_noise()
    import executorch_trt
    from executorch_trt.inspection.pte_file import ProgramReadError

    try:
        report = executorch_trt.inspect(path)
    except ProgramReadError as exc:
        print(f"inspect_pte: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
