// Copyright (c) executorch-trt authors.

#include "py/binding/safe_text.h"

#include <cstdint>
#include <cstdio>

namespace executorch_trt::python {
namespace {

// The length of the valid UTF-8 sequence starting at text[i], or 0 if there is none.
size_t ValidSequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) {
    return 1;
  }
  size_t n = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2;
    min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3;
    min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) {
    return 0;
  }
  uint32_t code = lead & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      return 0;
    }
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  return code < min || code > 0x10FFFF || surrogate ? 0 : n;
}

}  // namespace

std::string EscapeInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = ValidSequenceLength(text, i);
    if (n == 0) {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<uint8_t>(text[i]));
      out += escaped;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace executorch_trt::python
