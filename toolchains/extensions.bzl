"""Bazel 7+ (bzlmod) module extension: the repositories of toolchains/repositories.bzl.

Loaded only by MODULE.bazel; Bazel 4.2.3 (which has no `module_extension`) never reads it.
"""

load("//toolchains:repositories.bzl", "executorch_trt_repositories")

def _impl(_module_ctx):
    executorch_trt_repositories()

repositories = module_extension(implementation = _impl)
