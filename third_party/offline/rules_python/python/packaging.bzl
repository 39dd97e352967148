"""Offline stand-in for @rules_python//python:packaging.bzl (rules_python 0.31.0).

py_wheel, py_package and py_wheel_dist as rules_python 0.31.0 defines them: the rule
implementations in python/private/ and tools/wheelmaker.py are upstream's files unchanged
(Apache-2.0, LICENSE). Only this macro differs: the `twine` publish target is left out
(publishing needs twine and the network).
"""

load("//python/private:py_package.bzl", "py_package_lib")
load("//python/private:py_wheel.bzl", _PyWheelInfo = "PyWheelInfo", _py_wheel = "py_wheel")

PyWheelInfo = _PyWheelInfo

py_package = rule(
    implementation = py_package_lib.implementation,
    doc = "Selects the files of the given Python packages from the transitive dependencies of deps.",
    attrs = py_package_lib.attrs,
)

def _py_wheel_dist_impl(ctx):
    dir = ctx.actions.declare_directory(ctx.attr.out)
    name_file = ctx.attr.wheel[PyWheelInfo].name_file
    cmds = [
        "mkdir -p \"%s\"" % dir.path,
        """cp "{}" "{}/$(cat "{}")" """.format(ctx.files.wheel[0].path, dir.path, name_file.path),
    ]
    ctx.actions.run_shell(
        inputs = ctx.files.wheel + [name_file],
        outputs = [dir],
        command = "\n".join(cmds),
        mnemonic = "CopyToDirectory",
        progress_message = "Copying files to directory",
        use_default_shell_env = True,
    )
    return [
        DefaultInfo(files = depset([dir]), runfiles = ctx.runfiles([dir])),
    ]

py_wheel_dist = rule(
    doc = "A dist/ folder with the wheel under its stamped name.",
    implementation = _py_wheel_dist_impl,
    attrs = {
        "out": attr.string(doc = "name of the resulting directory", mandatory = True),
        "wheel": attr.label(doc = "a py_wheel target", providers = [PyWheelInfo]),
    },
)

def _propagating_kwargs(kwargs):
    return {k: kwargs[k] for k in ("testonly", "tags", "compatible_with", "restricted_to") if k in kwargs}

def py_wheel(name, twine = None, publish_args = [], **kwargs):
    """Builds a Python wheel (PEP 427) `name` and its dist folder `name.dist`.

    Args:
        name: the target name.
        twine: not supported offline (fails when set).
        publish_args: unused (kept for the upstream signature).
        **kwargs: the py_wheel rule's attributes (distribution, version, deps, requires_file, ...).
    """
    if twine:
        fail("py_wheel(twine = ...): publishing is not available in the offline rules_python stand-in")
    py_wheel_dist(
        name = "{}.dist".format(name),
        wheel = name,
        out = kwargs.pop("dist_folder", "{}_dist".format(name)),
        **_propagating_kwargs(kwargs)
    )
    _py_wheel(name = name, **kwargs)

py_wheel_rule = _py_wheel
