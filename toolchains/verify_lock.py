"""Verifies an installed environment against requirements_lock.txt (run by
//toolchains:python_env.bzl).

Exits 1 naming each package whose installed version differs from the lock (with both
versions) or that is missing; writes `pip freeze` to --freeze-out on success.
"""

import argparse
import importlib.metadata
import re
import sys


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _read_lock(path: str) -> dict:
    pins = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#")[0].strip()
            if not line:
                continue
            if "==" not in line:
                sys.exit(f"requirements_lock.txt: '{line}' is not pinned with ==")
            name, version = line.split("==", 1)
            pins[_normalize(name)] = version.strip()
    return pins


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lock", required=True)
    parser.add_argument("--executorch", required=True, help="EXECUTORCH_VERSION from pins.bzl")
    parser.add_argument("--freeze-out", required=True)
    args = parser.parse_args()

    installed = {
        _normalize(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
    }
    errors = []
    for name, want in sorted(_read_lock(args.lock).items()):
        have = installed.get(name)
        if have is None:
            errors.append(f"{name}: locked {want}, not installed")
        elif have != want:
            errors.append(f"{name}: locked {want}, installed {have}")
    et = installed.get("executorch")
    if et != args.executorch:
        errors.append(f"executorch: toolchains/pins.bzl pins {args.executorch}, installed {et}")
    if errors:
        print(
            "The pinned Python environment does not match requirements_lock.txt:", file=sys.stderr
        )
        for e in errors:
            print("  " + e, file=sys.stderr)
        return 1
    with open(args.freeze_out, "w", encoding="utf-8") as f:
        for name in sorted(installed):
            f.write(f"{name}=={installed[name]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
