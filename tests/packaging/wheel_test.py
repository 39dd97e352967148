"""//:wheel installed into a fresh virtual environment outside the checkout.

The wheel must hold the whole package and both libraries, require the pinned torch and
executorch (requirements.txt) and carry MODULE.bazel's version. It is installed with
`pip install --no-index` (no network: pip must find every requirement already installed) into
a new venv in a temporary directory whose site-packages has the pinned environment's
distributions (torch, executorch, ...) linked in, so the executorch wheel's lib/ sits beside
the installed package as in a real install. Then the installed libraries must resolve every
shared library they need without LD_LIBRARY_PATH (ldd), and installed_wheel_script.py, run
from that directory with no PYTHONPATH, no EXECUTORCH_TRT_* and no Bazel runfiles, must export
and run a model with a mutable buffer through executorch_trt.runtime and the stock
executorch.runtime with eager PyTorch's values, finding the package and its libraries in the
venv. And examples/link_into_app, built with CMake against the installed wheels (ExecuTorch's
CMake package and libexecutorch_trt.so), must run a product program with eager's values.
"""

from __future__ import annotations

import email.parser
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from runfiles import Runfiles

_WORKSPACE = "executorch_trt"
_LIBRARIES = ("libexecutorch_trt.so", "_runtime_binding.so")
# Distributions of the pinned environment not linked into the fresh venv: it has its own pip.
_NOT_LINKED = re.compile(r"^(pip|pip-.*\.dist-info|__pycache__)$")
# Variables that would let the package find the checkout's files instead of its own.
_SCRUBBED = re.compile(
    r"^(PYTHON.*|EXECUTORCH_TRT_.*|RUNFILES_.*|TEST_.*|LD_LIBRARY_PATH|"
    r"BUILD_WORKSPACE_DIRECTORY|BUILD_WORKING_DIRECTORY|JAVA_RUNFILES)$"
)

# Run in the fresh venv: every Requires-Dist of the installed executorch_trt is satisfied by an
# installed distribution (prints each name; exit 1 naming the first that is not).
_REQUIREMENTS_SATISFIED = """
import sys
from importlib import metadata
from packaging.requirements import Requirement
for line in metadata.requires("executorch_trt"):
    req = Requirement(line)
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        sys.exit(f"{req} is not installed")
    if not req.specifier.contains(have, prereleases=True):
        sys.exit(f"{req} is not satisfied by the installed {req.name} {have}")
    print(req.name)
"""


def _runfile(path: str) -> str:
    runfiles = Runfiles.Create()
    found = runfiles.Rlocation(f"{_WORKSPACE}/{path}") if runfiles else None
    if not found or not os.path.exists(found):
        raise AssertionError(f"{path} is not in the test's runfiles (run under bazel test)")
    return found


def _wheel() -> str:
    wheels = glob.glob(os.path.join(os.path.dirname(_runfile("README.md")), "*.whl"))
    if len(wheels) != 1:
        raise AssertionError(f"expected one //:wheel in the runfiles root, found {wheels}")
    return wheels[0]


def _pins() -> list:
    """The torch and executorch lines of requirements.txt (the wheel's Requires-Dist)."""
    with open(_runfile("requirements.txt")) as f:
        return [line.strip() for line in f if re.match(r"^(torch|executorch)==", line)]


def _module_version() -> str:
    with open(_runfile("MODULE.bazel")) as f:
        match = re.search(r'module\(\s*name = "executorch_trt",\s*version = "([^"]+)"', f.read())
    if not match:
        raise AssertionError('MODULE.bazel has no module(name = "executorch_trt", version = ...)')
    return match.group(1)


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)


def _check(result: subprocess.CompletedProcess, what: str) -> None:
    if result.returncode != 0:
        raise AssertionError(
            f"{what} failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


def _steps(text: str) -> dict:
    """link_into_app's `step K: v0 v1 ...` lines -> {K: [floats]}."""
    return {
        int(m.group(1)): [float(v) for v in m.group(2).split()]
        for m in re.finditer(r"^step (\d+):((?: \S+)+)$", text, re.M)
    }


def _clean_env(home: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not _SCRUBBED.match(k)}
    env["HOME"] = home
    return env


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.wheel = _wheel()
        cls.root = tempfile.mkdtemp(prefix="executorch_trt_wheel_")
        cls.venv = os.path.join(cls.root, "venv")
        cls.python = os.path.join(cls.venv, "bin", "python")
        cls.env = _clean_env(cls.root)
        cls._install()
        cls.installed = os.path.join(cls.site_packages, "executorch_trt")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    @classmethod
    def _install(cls):
        # The fresh venv is made from the interpreter the pinned environment was made from.
        _check(_run([sys.executable, "-m", "venv", cls.venv]), "python -m venv")
        result = _run(
            [cls.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=cls.env,
        )
        _check(result, "finding the fresh venv's site-packages")
        cls.site_packages = result.stdout.strip()
        pinned = next(
            p
            for p in sys.path
            if p.endswith("site-packages") and os.path.isdir(os.path.join(p, "executorch"))
        )
        for entry in os.listdir(pinned):
            target = os.path.join(cls.site_packages, entry)
            if not _NOT_LINKED.match(entry) and not os.path.exists(target):
                os.symlink(os.path.join(pinned, entry), target)
        # --no-deps: the pinned environment does not satisfy all of torch's own requirements
        # (`pip check`: its setuptools is older than torch asks for), which pip would then try
        # to download. The wheel's own requirements are checked against what is installed.
        _check(
            _run(
                [
                    cls.python,
                    "-m",
                    "pip",
                    "install",
                    "--no-index",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--no-input",
                    cls.wheel,
                ],
                cwd=cls.root,
                env=cls.env,
            ),
            "pip install of the wheel",
        )

    def test_wheel_contents_and_metadata(self):
        cpython = f"cp{sys.version_info.major}{sys.version_info.minor}"
        self.assertEqual(
            os.path.basename(self.wheel),
            f"executorch_trt-{_module_version()}-{cpython}-{cpython}-linux_x86_64.whl",
        )
        with zipfile.ZipFile(self.wheel) as wheel:
            names = set(wheel.namelist())
            dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
            metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
        missing = [lib for lib in _LIBRARIES if f"executorch_trt/{lib}" not in names]
        self.assertEqual(missing, [], "libraries missing from the wheel's executorch_trt/")
        # The portable engine's operator table, read at export (runtime_kernels.py).
        self.assertIn("executorch_trt/engines/portable/operator_schemas.txt", names)
        # Every Python file of //py:executorch_trt, at its package path.
        package_dir = os.path.dirname(_runfile("py/executorch_trt/__init__.py"))
        sources = {
            os.path.relpath(os.path.join(d, f), os.path.dirname(package_dir))
            for d, _, files in os.walk(package_dir)
            for f in files
            if f.endswith(".py")
        }
        self.assertIn("executorch_trt/engines/__init__.py", sources)
        self.assertEqual(
            sources - names, set(), "Python files of the package missing from the wheel"
        )
        self.assertEqual(metadata["Version"], _module_version())
        pins = _pins()
        self.assertEqual(len(pins), 2, pins)
        self.assertEqual(sorted(metadata.get_all("Requires-Dist")), sorted(pins))

    def test_installed_requirements_are_satisfied(self):
        result = _run([self.python, "-c", _REQUIREMENTS_SATISFIED], cwd=self.root, env=self.env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.split()), ["executorch", "torch"], result.stdout)

    def test_installed_libraries_resolve_beside_executorch(self):
        """Every DT_NEEDED of both installed libraries resolves (ldd, no LD_LIBRARY_PATH), and
        ExecuTorch's libraries resolve to the executorch wheel's lib/ beside the package."""
        executorch_lib = os.path.join(self.site_packages, "executorch", "lib")
        for library in _LIBRARIES:
            path = os.path.join(self.installed, library)
            self.assertTrue(os.path.isfile(path) and not os.path.islink(path), path)
            result = _run(["ldd", path], env=self.env)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertNotIn("not found", result.stdout, f"{library}:\n{result.stdout}")
            resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", result.stdout, re.M))
            self.assertEqual(
                os.path.normpath(os.path.dirname(resolved["libexecutorch.so"])),
                executorch_lib,
                f"{library}:\n{result.stdout}",
            )

    def test_script_exports_and_runs_from_the_venv(self):
        script = os.path.join(self.root, "user_script.py")
        shutil.copy(_runfile("tests/packaging/installed_wheel_script.py"), script)
        shutil.copy(
            _runfile("examples/link_into_app/export_cache_model.py"),
            os.path.join(self.root, "export_cache_model.py"),
        )
        result = _run([self.python, script], cwd=self.root, env=self.env)
        self.assertEqual(
            result.returncode,
            0,
            f"the installed package's script failed:\n{result.stdout}\n{result.stderr}",
        )
        report = json.loads(result.stdout.strip().splitlines()[-1])
        print(json.dumps(report, indent=2))
        self.assertEqual(report["package"], os.path.join(self.installed, "__init__.py"))
        self.assertEqual(report["library"], os.path.join(self.installed, "libexecutorch_trt.so"))
        self.assertEqual(report["binding"], os.path.join(self.installed, "_runtime_binding.so"))
        self.assertIn("engine portable", report["delegates"])
        for runtime, diff in report["max_diff"].items():
            self.assertLess(diff, 1e-5, runtime)

    def test_cmake_app_links_the_installed_delegate(self):
        """examples/link_into_app/CMakeLists.txt as its comment says to build it, then the app on
        //examples/link_into_app's product program vs eager."""
        source = os.path.join(self.root, "link_into_app")
        os.makedirs(source)
        for name in ("CMakeLists.txt", "link_into_app.cpp"):
            shutil.copy(_runfile(f"examples/link_into_app/{name}"), source)
        build = os.path.join(self.root, "link_into_app_build")
        _check(
            _run(
                [
                    "cmake",
                    "-S",
                    source,
                    "-B",
                    build,
                    f"-DCMAKE_PREFIX_PATH={os.path.join(self.site_packages, 'executorch')}",
                    f"-DEXECUTORCH_TRT_DIR={self.installed}",
                ],
                env=self.env,
            ),
            "cmake configure",
        )
        _check(_run(["cmake", "--build", build], env=self.env), "cmake --build")
        app = os.path.join(build, "link_into_app")
        needed = _run(["ldd", app], env=self.env).stdout
        self.assertRegex(needed, r"libexecutorch_trt\.so => " + re.escape(self.installed), needed)
        result = _run([app, _runfile("examples/link_into_app/cache_model.pte")], env=self.env)
        self.assertEqual(result.returncode, 0, f"{result.stdout}\n{result.stderr}")
        with open(_runfile("examples/link_into_app/cache_model_expected.txt")) as f:
            want = _steps(f.read())
        got = _steps(result.stdout)
        self.assertEqual(sorted(got), sorted(want), result.stdout)
        for step, values in want.items():
            diff = max(abs(a - b) for a, b in zip(got[step], values))
            self.assertLess(diff, 1e-5, f"step {step}: {got[step]} vs eager {values}")


if __name__ == "__main__":
    unittest.main()
