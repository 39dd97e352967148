"""The package's architecture, checked on its sources (docs/architecture.md "Layers").

* Layers: a module imports only modules of its own layer and of the layers below it
  (``LAYERS``), function-level imports included: a lazy import does not make a dependency go
  away. ``//tests/py:layer_imports_test_*`` checks the same order the other way round, by
  importing each layer with only its Bazel closure present.
* No import cycles between the package's modules (importing ``a.b.c`` runs ``a.b``'s
  ``__init__`` too, so a package's ``__init__`` counts as imported by its modules' importers).
* ``options`` is a leaf (it needs only ``format``), and ``import executorch_trt.runtime``, with
  a program loaded and run, leaves ``executorch.exir`` (the exporter) out of the process.
"""

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest
from runfiles import Runfiles

PACKAGE = "executorch_trt"

#: Layer -> the layers it may import (besides itself), lowest first. The root package
#: (``executorch_trt/__init__.py``, the public API) may import every layer.
LAYERS: dict[str, set[str]] = {
    "quiet": set(),
    "format": set(),
    "options": {"format"},
    "ops": set(),
    "graph": {"format"},
    "passes": {"graph", "ops", "format"},
    "engines": {"passes", "graph", "ops", "format", "options"},
    "backend": {"engines", "passes", "graph", "ops", "format", "options"},
    "lowering": {"backend", "engines", "passes", "graph", "ops", "format", "options", "quiet"},
    "runtime": {"format", "quiet"},
    "inspection": {"format"},
    "llm": {
        "lowering",
        "backend",
        "engines",
        "passes",
        "graph",
        "ops",
        "format",
        "options",
        "quiet",
        "inspection",
        "runtime",
    },
}


def _package_dir() -> str:
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations
    return next(iter(spec.submodule_search_locations))


def _modules() -> dict[str, str]:
    """``{dotted module name: path}`` of every module of the package."""
    root = _package_dir()
    found = {}
    for directory, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(directory, f), os.path.dirname(root))
                name = rel[:-3].replace(os.sep, ".")
                found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = (
                    os.path.join(directory, f)
                )
    return found


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str, path: str, modules: dict[str, str]) -> set[str]:
    """The package modules ``name`` imports (at any depth of its code, not under
    ``if TYPE_CHECKING:``), each with the package ``__init__`` modules importing it runs
    (except the root package's and those containing ``name``, which are initialising already)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    is_package = path.endswith("__init__.py")
    targets: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
            continue
        if node.level:
            base = name.split(".")[: None if is_package else -1]
            base = base[: len(base) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}"
            targets.add(full if full in modules else module)
    result = set()
    for target in targets:
        if target != PACKAGE and not target.startswith(PACKAGE + "."):
            continue
        parts = target.split(".")
        for k in range(2, len(parts) + 1):  # every package __init__ on the way, and the module
            prefix = ".".join(parts[:k])
            # A package that contains ``name`` has begun to initialise before ``name`` runs.
            if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                result.add(prefix)
    return result


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


class ArchitectureTest(absltest.TestCase):
    def test_every_module_belongs_to_a_layer(self):
        layers = {_layer(m) for m in _modules()}
        self.assertEqual(
            sorted(layers - set(LAYERS) - {PACKAGE}),
            [],
            "a new top-level module or package: add it to LAYERS (and "
            "docs/architecture.md, py/BUILD)",
        )

    def test_layers_import_only_lower_layers(self):
        wrong = []
        for module, imported in sorted(_graph().items()):
            layer = _layer(module)
            if layer == PACKAGE:
                continue
            allowed = LAYERS[layer] | {layer}
            wrong += [
                f"{module} imports {target} (layer {_layer(target)!r})"
                for target in sorted(imported)
                if _layer(target) not in allowed
            ]
        self.assertEqual(wrong, [])

    def test_no_import_cycles(self):
        self.assertEqual(_cycles(_graph()), [])

    def test_the_cycle_check_sees_a_cycle(self):
        # The check itself: a lazy import back into a module that imports it is a cycle.
        graph = {
            "executorch_trt.a": {"executorch_trt.b"},
            "executorch_trt.b": {"executorch_trt.a"},
            "executorch_trt.c": set(),
        }
        self.assertEqual(_cycles(graph), [["executorch_trt.a", "executorch_trt.b"]])

    def test_function_level_imports_count(self):
        source = textwrap.dedent("""
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from executorch_trt.lowering import export
            def f():
                from executorch_trt.backend import preprocess
        """)
        path = os.path.join(self.create_tempdir().full_path, "m.py")
        with open(path, "w") as f:
            f.write(source)
        modules = {
            "executorch_trt.backend": "",
            "executorch_trt.backend.preprocess": "",
            "executorch_trt.lowering": "",
            "executorch_trt.lowering.export": "",
        }
        self.assertEqual(
            _imports("executorch_trt.format.m", path, modules),
            {"executorch_trt.backend", "executorch_trt.backend.preprocess"},
        )

    def test_options_is_a_leaf(self):
        imported = _graph()["executorch_trt.options"]
        self.assertEqual(sorted({_layer(m) for m in imported}), ["format"])

    def test_runtime_import_leaves_the_exporter_out(self):
        pte = Runfiles.Create().Rlocation("executorch_trt/examples/kv_cache_decode.pte")
        script = textwrap.dedent(f"""
            import sys
            import torch
            import executorch_trt.runtime as runtime
            program = runtime.load({pte!r})
            (logits,) = program.load_method("decode").execute(
                [torch.tensor([[1]]), torch.tensor([0])])
            assert logits.shape[-1] > 1, logits.shape
            exir = sorted(m for m in sys.modules if m.startswith("executorch.exir"))
            print("\\n".join(exir))
        """)
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "", "executorch.exir modules were imported")

    def test_the_exporter_import_is_seen(self):
        # The check itself: importing the exporter does load executorch.exir.
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "import sys, executorch_trt; executorch_trt.export; "
                    "print(any(m.startswith('executorch.exir') for m in sys.modules))"
                ),
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        )
        self.assertEqual(done.stdout.strip(), "True", done.stderr)


if __name__ == "__main__":
    absltest.main()
