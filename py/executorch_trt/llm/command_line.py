"""What the ``llm`` commands (``//:export_llm``, ``//:chat``) share: absl flags parsed into
usage errors (exit 2 with the message), and paths read relative to where ``bazel run`` started."""

from __future__ import annotations

import os
from typing import Any

from absl import flags


class UsageError(Exception):
    """Bad usage or a bad input; the command prints the message and its usage, exits 2."""


def resolve(path: str) -> str:
    """``path`` made absolute against the directory ``bazel run`` was started in
    (``$BUILD_WORKING_DIRECTORY``), else the current one; ``~`` expanded."""
    base = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def parse(fv: flags.FlagValues, argv: list[str], required: tuple[str, ...]) -> flags.FlagValues:
    """``argv`` (``argv[0]`` the program) parsed into ``fv``, which defines ``--help``. Raises
    ``UsageError`` for an unknown flag or a bad value (absl's message), a positional argument,
    or a ``required`` flag missing (unless ``--help`` was given)."""
    try:
        rest = fv(argv)
    except flags.Error as exc:
        raise UsageError(str(exc)) from None
    if fv["help"].value:
        return fv
    if len(rest) > 1:
        raise UsageError(f"unexpected arguments {rest[1:]} (every input is a --flag)")
    for name in required:
        if fv[name].value is None:
            raise UsageError(f"--{name} is required")
    return fv


def value(fv: flags.FlagValues, name: str) -> Any:
    """Flag ``name``'s parsed value (absl types every value Optional; the definitions and
    ``parse``'s required check fix its type)."""
    return fv[name].value
