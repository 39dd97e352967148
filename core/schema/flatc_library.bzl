"""flatc_cpp_library: a header-only cc_library of the C++ code flatc generates from a schema."""

load("@rules_cc//cc:defs.bzl", "cc_library")

def flatc_cpp_library(name, schema, headers, visibility):
    """Declares `name`_cpp (a private genrule running Debian's flatc on `schema`) and `name`.

    Args:
      name: the cc_library; it depends on @flatbuffers.
      schema: label of the .fbs file(s) (here, from the pinned ExecuTorch wheel).
      headers: the files flatc writes for `schema` (`<schema>_generated.h`), in this package.
      visibility: the cc_library's visibility.
    """
    native.genrule(
        name = name + "_cpp",
        srcs = [schema],
        outs = headers,
        cmd = "$(location @flatc//:flatc) --cpp --scoped-enums -o $(@D) $(SRCS)",
        tools = ["@flatc//:flatc"],
        visibility = ["//visibility:private"],
    )
    cc_library(
        name = name,
        hdrs = [":" + header for header in headers],
        visibility = visibility,
        deps = ["@flatbuffers"],
    )
