"""`./bazelw run //:python -- SCRIPT [ARGS...]`: runs a user's script under the pinned environment.

The script runs as `__main__` with `executorch_trt` importable, relative paths resolved
from the directory the user ran Bazel in (BUILD_WORKING_DIRECTORY), and the delegate library
findable (EXECUTORCH_TRT_LIBRARY points at the built libexecutorch_trt.so). Exit 2 on bad
usage or a missing script; otherwise the script's own exit status.
"""

import os
import runpy
import sys
from typing import NoReturn


def _usage(message: str) -> NoReturn:
    print(
        f"//:python: {message}\nusage: ./bazelw run //:python -- path/to/script.py [args...]",
        file=sys.stderr,
    )
    sys.exit(2)


def _delegate_library() -> str | None:
    """The built libexecutorch_trt.so, found the way executorch_trt.runtime finds it
    (env var, then Bazel runfiles). Resolved before main() changes the working directory
    and argv, which runfiles discovery depends on."""
    from executorch_trt import runtime

    try:
        return runtime.library_path()
    except runtime.LibraryNotFoundError:
        return None


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        _usage("no script given")
    if "EXECUTORCH_TRT_LIBRARY" not in os.environ:
        lib = _delegate_library()
        if lib:
            os.environ["EXECUTORCH_TRT_LIBRARY"] = os.path.abspath(lib)
    cwd = os.environ.get("BUILD_WORKING_DIRECTORY")
    if cwd:
        os.chdir(cwd)
    script = os.path.abspath(sys.argv[1])
    if not os.path.isfile(script):
        _usage(f"script not found: {sys.argv[1]} (relative to {os.getcwd()})")
    sys.argv = [script, *sys.argv[2:]]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
