"""Offline stand-in for @rules_proto//proto:defs.bzl: re-exports Bazel 4.2.3's native proto rules."""

def proto_library(**attrs):
    native.proto_library(**attrs)

def proto_lang_toolchain(**attrs):
    native.proto_lang_toolchain(**attrs)
