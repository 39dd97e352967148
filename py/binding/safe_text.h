// Copyright (c) executorch-trt authors.
//
// safe_text.h: text from a program (method and buffer names, messages that quote them) made
// safe to hand to Python, whose str conversion rejects invalid UTF-8 with an exception.

#pragma once

#include <string>
#include <string_view>

namespace executorch_trt::python {

// `text` unchanged when it is valid UTF-8; otherwise each byte that is not part of a valid
// UTF-8 sequence is written as "\xNN" (so a corrupted name still reads, and never throws).
std::string EscapeInvalidUtf8(std::string_view text);

}  // namespace executorch_trt::python
