// Copyright (c) executorch-trt authors.
//
// owned_buffer.h: one buffer of a session's state, bytes the session owns and binds to the
// program (LoadedProgram::BindBuffers) before each of its calls.

#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace executorch_trt::extension::llm {

// `size` bytes, zeroed, aligned to 64 (a cache line, and what torch gives a tensor's storage, so
// a kernel sees the same alignment here as under executorch_trt.runtime).
//
// Ownership: the object owns its bytes; moving it moves them (the address stays the same, which
// is what a binding points at). Thread-safety: none (a plain buffer).
class OwnedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  OwnedBuffer() = default;
  explicit OwnedBuffer(size_t size)
      // At least one byte: a zero-size buffer still has an address to bind.
      : data_(static_cast<uint8_t*>(
            ::operator new (size == 0 ? 1 : size, std::align_val_t{kAlignment}))),
        size_(size) {
    std::memset(data_.get(), 0, size == 0 ? 1 : size);
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kAlignment}); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

}  // namespace executorch_trt::extension::llm
