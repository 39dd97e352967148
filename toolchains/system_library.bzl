"""A repository over files a Debian package installs (GoogleTest sources, nlohmann-json and
FlatBuffers headers, the flatc compiler).

Fails with a message naming the package to install (./bazelw installs it) when the path is
missing, instead of Bazel's bare "path does not exist".
"""

def _system_library_impl(rctx):
    path = rctx.path(rctx.attr.path)
    if not path.exists:
        fail("{} not found: install the Debian package '{}' (./bazelw does this on first run).".format(
            rctx.attr.path,
            rctx.attr.debian_package,
        ))
    if rctx.attr.mount_as:
        rctx.symlink(path, rctx.attr.mount_as)
    else:
        for child in path.readdir():
            rctx.symlink(child, child.basename)
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
    },
)
