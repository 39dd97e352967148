// Copyright (c) executorch-trt authors.
//
// name_checks.cpp: CheckNames (nested_plan.h). The runtime logs these names, and Python's log
// redirect throws on invalid UTF-8.

#include <cstddef>
#include <cstdint>

#include "core/engine/portable/nested_plan.h"

namespace executorch_trt::nested_plan {
namespace {

// True for valid UTF-8 with no ASCII control characters (what may be logged safely).
bool IsCleanUtf8(const flatbuffers::String* s) {
  if (s == nullptr) return true;
  const auto* p = reinterpret_cast<const uint8_t*>(s->data());
  const size_t n = s->size();
  for (size_t i = 0; i < n;) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

Error CheckNames(const NestedPlan& plan) {
  const fb::ExecutionPlan& p = plan.plan();
  if (!IsCleanUtf8(p.name())) return plan.Fail("its name is not clean UTF-8", -1, 0);
  for (uint32_t i = 0; i < Size(p.operators()); ++i) {
    const fb::Operator* op = p.operators()->Get(i);
    if (op->name() == nullptr || op->name()->size() == 0) {
      return plan.Fail("an operator has no name", i, 0);
    }
    if (!IsCleanUtf8(op->name()) || !IsCleanUtf8(op->overload())) {
      return plan.Fail("an operator name or overload is not clean UTF-8", i, 0);
    }
  }
  for (uint32_t i = 0; i < Size(p.delegates()); ++i) {
    if (!IsCleanUtf8(p.delegates()->Get(i)->id())) {
      return plan.Fail("a delegate id is not clean UTF-8", i, 0);
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::nested_plan
