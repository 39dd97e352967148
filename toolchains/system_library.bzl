"""A repository over files a Debian package installs (GoogleTest sources, nlohmann-json,
FlatBuffers, Abseil and libb2 headers, libb2's static library, the flatc compiler).

Fails with a message naming the package to install (./bazelw installs it) when a path is
missing, instead of Bazel's bare "path does not exist".
"""

def _missing(rctx, path):
    fail("{} not found: install the Debian package '{}' (./bazelw does this on first run).".format(
        path,
        rctx.attr.debian_package,
    ))

def _multiarch_library(rctx, name):
    """The library `name` in Debian's multiarch directory (/usr/lib/<triplet>/)."""
    for directory in rctx.path("/usr/lib").readdir():
        if "-linux-gnu" in directory.basename and directory.get_child(name).exists:
            return directory.get_child(name)
    return _missing(rctx, "/usr/lib/<multiarch>/" + name)

def _system_library_impl(rctx):
    path = rctx.path(rctx.attr.path)
    if not path.exists:
        _missing(rctx, rctx.attr.path)
    if rctx.attr.mount_as:
        rctx.symlink(path, rctx.attr.mount_as)
    else:
        for child in path.readdir():
            rctx.symlink(child, child.basename)
    for name in rctx.attr.libraries:
        rctx.symlink(_multiarch_library(rctx, name), name)
    rctx.symlink(rctx.attr.build_file, "BUILD.bazel")

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {
        "path": attr.string(mandatory = True),
        "debian_package": attr.string(mandatory = True),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
        # Symlink `path` itself under this name (a header directory, or a single file such as a
        # compiler) instead of its children.
        "mount_as": attr.string(),
        # Library files (e.g. "libb2.a") the package installs in Debian's multiarch library
        # directory, each symlinked under its own name beside `path`.
        "libraries": attr.string_list(),
    },
)
