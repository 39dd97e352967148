"""Unpacks the C++ SDK from an ExecuTorch wheel (run by //toolchains:executorch_sdk.bzl).

usage: unpack_executorch_sdk.py WHEEL EXPECTED_VERSION EXPECTED_SHA256 OUT_DIR
Fails (exit 1, message on stderr naming both values) when the wheel's sha256 or its
declared version differs from the pins in toolchains/pins.bzl.
"""

import hashlib
import sys
import zipfile


def main(wheel: str, version: str, sha256: str, out: str) -> int:
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != sha256:
        print(f"the downloaded executorch=={version} wheel has sha256 {digest}, but "
              f"toolchains/pins.bzl has EXECUTORCH_WHEEL_SHA256 = \"{sha256}\". When you change "
              "EXECUTORCH_VERSION, set EXECUTORCH_WHEEL_SHA256 to the new wheel's sha256 "
              "(and change requirements.txt and the lock to the same version).", file=sys.stderr)
        return 1
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"executorch-{version}.dist-info/METADATA").decode()
        declared = next(
            (l.split(":", 1)[1].strip() for l in meta.splitlines() if l.startswith("Version:")), None
        )
        if declared != version:
            print(f"{wheel}: wheel declares executorch {declared}, toolchains/pins.bzl pins {version}",
                  file=sys.stderr)
            return 1
        for name in z.namelist():
            keep = name.startswith("executorch/include/") or (
                name.startswith("executorch/lib/") and name.endswith(".so")
            )
            if keep and not name.endswith("/"):
                z.extract(name, out)
    with open(f"{out}/VERSION", "w") as f:
        f.write(version + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
