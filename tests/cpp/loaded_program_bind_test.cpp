// Copyright (c) executorch-trt authors.
//
// LoadedProgram::BindBuffers / BindBuffer on the runner's program (examples/kv_cache_decode.pte:
// prefill and decode sharing named KV caches): caller memory is bound in every method, memory
// two buffers would share is refused with both named and nothing bound (they would overwrite
// each other through the delegate's in-place updates), an exchange of memory works in one call,
// and a bad name, size, null or wrapping memory, or one name given two memories in a call
// binds none of its bindings.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <executorch/runtime/platform/runtime.h>

#include "extension/program/loaded_program.h"
#include "extension/program/prefill_decode_program.h"

namespace executorch_trt {
namespace {

using extension::LoadedProgram;
using extension::NamedBuffer;

constexpr char kProgram[] = "examples/kv_cache_decode.pte";

class LoadedProgramBindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    std::string error;
    auto loaded = LoadedProgram::LoadFile(kProgram, {}, &error);
    ASSERT_TRUE(loaded.ok()) << error;
    program_ = std::move(loaded.get());
    ASSERT_GE(program_->buffers().size(), 2u) << "the runner's program names its caches";
    a_ = &program_->buffers()[0];
    b_ = &program_->buffers()[1];
    ASSERT_EQ(a_->nbytes, b_->nbytes);
    for (const NamedBuffer& buffer : program_->buffers()) {
      arena_.push_back(program_->buffer_data(buffer.name));
    }
  }

  // Where every method's tensor of `buffer` points.
  std::vector<void*> TensorData(const NamedBuffer& buffer) {
    std::vector<void*> out;
    for (size_t m : buffer.methods) {
      auto t = program_->buffer_tensor(m, buffer.name);
      EXPECT_TRUE(t.ok()) << buffer.name;
      out.push_back(t.ok() ? t->mutable_data_ptr() : nullptr);
    }
    return out;
  }

  // Every buffer still points where it did after loading.
  void ExpectNothingBound() {
    for (size_t i = 0; i < program_->buffers().size(); ++i) {
      const NamedBuffer& buffer = program_->buffers()[i];
      EXPECT_EQ(program_->buffer_data(buffer.name), arena_[i]) << buffer.name;
      for (void* p : TensorData(buffer)) {
        EXPECT_EQ(p, arena_[i]) << buffer.name;
      }
    }
  }

  std::unique_ptr<LoadedProgram> program_;
  const NamedBuffer* a_ = nullptr;
  const NamedBuffer* b_ = nullptr;
  std::vector<void*> arena_;  // each buffer's storage after loading
};

TEST_F(LoadedProgramBindTest, BindsDisjointPartsOfOneAllocationInEveryMethod) {
  std::vector<uint8_t> memory(a_->nbytes + b_->nbytes);
  std::string error;
  ASSERT_EQ(program_->BindBuffers({{a_->name, memory.data(), a_->nbytes},
                                   {b_->name, memory.data() + a_->nbytes, b_->nbytes}},
                                  &error),
            Error::Ok)
      << error;
  EXPECT_EQ(program_->buffer_data(a_->name), memory.data());
  EXPECT_EQ(program_->buffer_data(b_->name), memory.data() + a_->nbytes);
  ASSERT_GE(a_->methods.size(), 2u) << "prefill and decode share the cache";
  for (void* p : TensorData(*a_)) {
    EXPECT_EQ(p, memory.data());
  }
  for (void* p : TensorData(*b_)) {
    EXPECT_EQ(p, memory.data() + a_->nbytes);
  }
}

TEST_F(LoadedProgramBindTest, RefusesTwoBuffersInOneMemoryInOneCall) {
  std::vector<uint8_t> memory(a_->nbytes + 4);
  std::string error;
  // b starts 4 bytes into a: they share all but 4 bytes.
  EXPECT_EQ(program_->BindBuffers(
                {{a_->name, memory.data(), a_->nbytes}, {b_->name, memory.data() + 4, b_->nbytes}},
                &error),
            Error::InvalidArgument);
  EXPECT_NE(error.find("overlaps buffer"), std::string::npos) << error;
  EXPECT_NE(error.find("'" + a_->name + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("'" + b_->name + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("(bound in the same call)"), std::string::npos) << error;
  ExpectNothingBound();
}

TEST_F(LoadedProgramBindTest, RefusesMemoryOfAnotherBuffersCurrentStorage) {
  std::vector<uint8_t> memory(a_->nbytes);
  std::string error;
  ASSERT_EQ(program_->BindBuffer(a_->name, memory.data(), a_->nbytes, &error), Error::Ok) << error;
  EXPECT_EQ(program_->BindBuffer(b_->name, memory.data(), b_->nbytes, &error),
            Error::InvalidArgument);
  EXPECT_NE(error.find("cannot bind buffer '" + b_->name + "': its memory overlaps buffer '" +
                       a_->name + "' (its current storage)"),
            std::string::npos)
      << error;
  EXPECT_EQ(program_->buffer_data(b_->name), arena_[1]);
  // The arena's own storage is refused too: binding a buffer to another's arena memory.
  ASSERT_GE(program_->buffers().size(), 3u);
  EXPECT_EQ(program_->BindBuffer(b_->name, arena_[2], b_->nbytes, &error), Error::InvalidArgument)
      << "bound '" << b_->name << "' over '" << program_->buffers()[2].name << "'";
}

TEST_F(LoadedProgramBindTest, ExchangesMemoryInOneCallButNotOneAtATime) {
  std::vector<uint8_t> x(a_->nbytes), y(b_->nbytes);
  std::string error;
  ASSERT_EQ(program_->BindBuffers(
                {{a_->name, x.data(), a_->nbytes}, {b_->name, y.data(), b_->nbytes}}, &error),
            Error::Ok)
      << error;
  // One at a time, a's new memory is still b's storage.
  EXPECT_EQ(program_->BindBuffer(a_->name, y.data(), a_->nbytes, &error), Error::InvalidArgument);
  EXPECT_EQ(program_->buffer_data(a_->name), x.data());
  ASSERT_EQ(program_->BindBuffers(
                {{a_->name, y.data(), a_->nbytes}, {b_->name, x.data(), b_->nbytes}}, &error),
            Error::Ok)
      << error;
  EXPECT_EQ(program_->buffer_data(a_->name), y.data());
  EXPECT_EQ(program_->buffer_data(b_->name), x.data());
}

TEST_F(LoadedProgramBindTest, ABadBindingBindsNoneOfTheCall) {
  std::vector<uint8_t> x(a_->nbytes), y(b_->nbytes);
  std::string error;
  EXPECT_EQ(
      program_->BindBuffers(
          {{a_->name, x.data(), a_->nbytes}, {"no_such_cache", y.data(), b_->nbytes}}, &error),
      Error::NotFound);
  EXPECT_NE(error.find("no mutable buffer named 'no_such_cache'"), std::string::npos) << error;
  EXPECT_NE(error.find("'" + a_->name + "'"), std::string::npos) << "lists the names: " << error;
  EXPECT_EQ(program_->BindBuffers(
                {{a_->name, x.data(), a_->nbytes}, {b_->name, y.data(), b_->nbytes - 1}}, &error),
            Error::InvalidArgument);
  EXPECT_NE(
      error.find(std::to_string(b_->nbytes - 1) + " bytes given for " + std::to_string(b_->nbytes)),
      std::string::npos)
      << error;
  EXPECT_EQ(program_->BindBuffers(
                {{a_->name, x.data(), a_->nbytes}, {b_->name, nullptr, b_->nbytes}}, &error),
            Error::InvalidArgument);
  EXPECT_NE(error.find("binding buffer '" + b_->name + "': null memory"), std::string::npos)
      << error;
  // One name twice with different memory: one of them would silently go unused.
  EXPECT_EQ(program_->BindBuffers(
                {{a_->name, x.data(), a_->nbytes}, {a_->name, y.data(), a_->nbytes}}, &error),
            Error::InvalidArgument);
  EXPECT_NE(error.find("binding buffer '" + a_->name + "' twice in one call"), std::string::npos)
      << error;
  // A range that wraps past the end of the address space would hide an overlap.
  const uintptr_t top = (UINTPTR_MAX - a_->nbytes / 2) & ~uintptr_t{63};
  EXPECT_EQ(program_->BindBuffers({{a_->name, reinterpret_cast<void*>(top), a_->nbytes},
                                   {b_->name, reinterpret_cast<void*>(top + 64), b_->nbytes}},
                                  &error),
            Error::InvalidArgument);
  EXPECT_NE(error.find("pass the end of the address space"), std::string::npos) << error;
  ExpectNothingBound();
}

TEST_F(LoadedProgramBindTest, TheSameMemoryTwiceOrAgainIsFine) {
  std::vector<uint8_t> x(a_->nbytes);
  std::string error;
  ASSERT_EQ(program_->BindBuffers(
                {{a_->name, x.data(), a_->nbytes}, {a_->name, x.data(), a_->nbytes}}, &error),
            Error::Ok)
      << error;
  ASSERT_EQ(program_->BindBuffer(a_->name, x.data(), a_->nbytes, &error), Error::Ok) << error;
  EXPECT_EQ(program_->buffer_data(a_->name), x.data());
}

// PrefillDecodeProgram binds all its caches in one BindBuffers call: a cache listed twice is
// refused at load (one of its two memories would go unused), null memory at bind.
TEST(PrefillDecodeProgramBindTest, RefusesACacheListedTwiceAndNullMemory) {
  using extension::CacheBuffer;
  using extension::PrefillDecodeProgram;
  executorch::runtime::runtime_init();
  std::string error;
  auto loaded = LoadedProgram::LoadFile(kProgram, {}, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  const NamedBuffer& first = loaded.get()->buffers().at(0);
  const CacheBuffer cache{first.name, static_cast<int64_t>(first.nbytes / 4)};
  auto twice = PrefillDecodeProgram::Load(kProgram, {cache, cache}, &error);
  EXPECT_EQ(twice.error(), Error::InvalidArgument);
  EXPECT_NE(error.find("cache '" + first.name + "' is listed twice"), std::string::npos) << error;
  auto once = PrefillDecodeProgram::Load(kProgram, {cache}, &error);
  ASSERT_TRUE(once.ok()) << error;
  EXPECT_EQ(once.get()->BindCaches(nullptr, &error), Error::InvalidArgument);
  std::vector<std::vector<float>> memory(1, std::vector<float>(cache.numel));
  EXPECT_EQ(once.get()->BindCaches(&memory, &error), Error::Ok) << error;
}

}  // namespace
}  // namespace executorch_trt
