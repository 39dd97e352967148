"""Imports every module of one layer of the package (argv[1]) with only that layer's Bazel
closure in the runfiles (py/BUILD): a module that imports a higher layer, which is not there,
fails with ``ModuleNotFoundError`` naming it."""

import importlib
import importlib.util
import os
import sys

from absl.testing import absltest

LAYER = ""


class LayerImportsTest(absltest.TestCase):
    def test_every_module_of_the_layer_imports(self):
        spec = importlib.util.find_spec("executorch_trt")
        root = next(iter(spec.submodule_search_locations))
        folder = os.path.join(root, LAYER)
        if os.path.isdir(folder):
            names = []
            for directory, _, files in os.walk(folder):
                for f in sorted(files):
                    if f.endswith(".py"):
                        rel = os.path.relpath(os.path.join(directory, f), os.path.dirname(root))
                        names.append(rel[:-3].replace(os.sep, ".").removesuffix(".__init__"))
        else:
            names = [f"executorch_trt.{LAYER}"]
        self.assertNotEmpty(names)
        for name in sorted(names):
            with self.subTest(module=name):
                importlib.import_module(name)
        higher = sorted(
            {m.split(".")[1] for m in sys.modules if m.startswith("executorch_trt.")} - {LAYER}
        )
        print(f"{LAYER}: {len(names)} modules imported; layers loaded with it: {higher}")


if __name__ == "__main__":
    LAYER = sys.argv.pop(1)
    absltest.main()
