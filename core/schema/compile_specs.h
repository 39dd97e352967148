// Copyright (c) executorch-trt authors.
//
// compile_specs.h: whether a program's delegate entries can be handed to ExecuTorch's method
// loader. BackendDelegate::Init reads each compile spec's key and value without a null check,
// and flatbuffers' verifier accepts an absent (optional) field: a .pte whose bytes were
// changed so that one is absent crashes the loader instead of failing it.

#pragma once

// Before the hidden region: what flatbuffers calls in the C library (__assert_fail, strncmp
// in its identifier check) must keep default visibility, or a build that does not inline
// them (the fuzz configuration) links against a hidden undefined symbol.
#include <cassert>
#include <cstdint>
#include <cstring>

// Hidden, as everywhere program_generated.h is included (core/schema/BUILD).
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"

namespace executorch_trt::schema {

// The index of the first compile spec of `delegate` without a key or a value, or -1.
inline int64_t IncompleteCompileSpec(const executorch_flatbuffer::BackendDelegate& delegate) {
  const auto* specs = delegate.compile_specs();
  for (uint32_t i = 0; specs != nullptr && i < specs->size(); ++i) {
    const executorch_flatbuffer::CompileSpec* spec = specs->Get(i);
    if (spec == nullptr || spec->key() == nullptr || spec->value() == nullptr) {
      return i;
    }
  }
  return -1;
}

}  // namespace executorch_trt::schema

#pragma GCC visibility pop
