// Copyright (c) executorch-trt authors.
//
// Concurrent sessions: one ExecuTorch Program (outer_kv.pte from
// tests/cpp/testdata/make_kv_testdata.py, whose forward is one TensorRTBackend delegate call)
// loaded once and shared; several threads each load their own Method from it (own planned
// memory, so their own delegate handle and nested program) and run a conversation on their own
// cache memory, all at the same time. Every thread's results must equal the single-threaded
// run of the same conversation, and the closed-form model. Built with --config=tsan this is
// the data-race check of the delegate's shared state (backend registration, kernel registry,
// copy counter, program data).
//
// Model: k_cache_out = k_cache with row pos set to 2x+1; y = k_cache_out.sum(dim=1).

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/common/runtime_types.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::Program;
using testing::OwnedTensor;

constexpr int kRows = testing::kKvRows;
constexpr int kDim = testing::kKvDim;
constexpr int kThreads = 4;
constexpr int kSteps = 12;

// What one conversation produced: the cache and y after every step.
struct Transcript {
  std::vector<std::vector<float>> caches;
  std::vector<std::vector<float>> ys;
};

// The input of step `step` of conversation `session`: distinct per session and step.
std::vector<float> StepInput(int session, int step) {
  return {static_cast<float>(session), static_cast<float>(step), 0.5f * session - step,
          static_cast<float>(session * kSteps + step)};
}
int64_t StepPos(int session, int step) { return (session + 3 * step) % kRows; }

// The closed-form model: row pos = 2x+1, y = column sums.
Transcript Expected(int session) {
  Transcript t;
  std::vector<float> cache(kRows * kDim, 0.0f);
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> x = StepInput(session, step);
    const int64_t pos = StepPos(session, step);
    std::vector<float> y;
    testing::KvModelStep(&cache, x, pos, &y);
    t.caches.push_back(cache);
    t.ys.push_back(y);
  }
  return t;
}

// One session: its own Method (planned memory, delegate handle) loaded from the shared
// program, and its own cache, threaded through the steps by the caller.
class Session {
 public:
  explicit Session(const Program& program) {
    auto meta = program.method_meta("forward");
    if (!meta.ok()) {
      error_ = "method_meta(forward) failed";
      return;
    }
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      buffers_.emplace_back(static_cast<size_t>(meta->memory_planned_buffer_size(i).get()));
      spans_.emplace_back(buffers_.back().data(), buffers_.back().size());
    }
    planned_ =
        std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(spans_.data(), spans_.size()));
    method_allocator_ = std::make_unique<MemoryAllocator>(sizeof(method_pool_), method_pool_);
    memory_ = std::make_unique<MemoryManager>(method_allocator_.get(), planned_.get());
    auto method = program.load_method("forward", memory_.get());
    if (!method.ok()) {
      error_ = "load_method(forward) failed with error " +
               std::to_string(static_cast<int>(method.error()));
      return;
    }
    method_ = std::make_unique<Method>(std::move(method.get()));
  }

  const std::string& error() const { return error_; }

  // Runs conversation `session` from a zero cache; returns what every step produced, or
  // stops at the first failure (recorded in error()).
  Transcript Run(int session) {
    Transcript t;
    OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
    for (int step = 0; step < kSteps; ++step) {
      OwnedTensor<float> x(ScalarType::Float, {1, kDim}, StepInput(session, step));
      OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {StepPos(session, step)});
      const EValue inputs[] = {EValue(cache.tensor()), EValue(x.tensor()), EValue(pos.tensor())};
      for (size_t i = 0; i < 3; ++i) {
        if (method_->set_input(inputs[i], i) != Error::Ok) {
          error_ = "set_input " + std::to_string(i) + " failed at step " + std::to_string(step);
          return t;
        }
      }
      if (method_->execute() != Error::Ok) {
        error_ = "execute failed at step " + std::to_string(step);
        return t;
      }
      const auto& k = method_->get_output(0).toTensor();
      const auto& y = method_->get_output(1).toTensor();
      t.caches.emplace_back(k.const_data_ptr<float>(), k.const_data_ptr<float>() + kRows * kDim);
      t.ys.emplace_back(y.const_data_ptr<float>(), y.const_data_ptr<float>() + kDim);
      // The caller owns the cache: the next step starts from this one's.
      std::memcpy(cache.ptr(), k.const_data_ptr<float>(), kRows * kDim * sizeof(float));
    }
    return t;
  }

 private:
  alignas(16) uint8_t method_pool_[64 * 1024];
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<Span<uint8_t>> spans_;
  std::unique_ptr<HierarchicalAllocator> planned_;
  std::unique_ptr<MemoryAllocator> method_allocator_;
  std::unique_ptr<MemoryManager> memory_;
  std::unique_ptr<Method> method_;
  std::string error_;
};

class ConcurrentSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    bytes_ = testing::ReadFile(testing::TestDataPath("outer_kv.pte"));
    ASSERT_FALSE(bytes_.empty()) << "missing " << testing::TestDataPath("outer_kv.pte");
    loader_ =
        std::make_unique<executorch::extension::BufferDataLoader>(bytes_.data(), bytes_.size());
    auto program = Program::load(loader_.get(), Program::Verification::InternalConsistency);
    ASSERT_TRUE(program.ok()) << "outer_kv.pte does not load";
    program_ = std::make_unique<Program>(std::move(program.get()));
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<executorch::extension::BufferDataLoader> loader_;
  std::unique_ptr<Program> program_;
};

TEST_F(ConcurrentSessionsTest, ThreadsOnOneProgramGiveTheSingleThreadedResults) {
  // Single-threaded: each conversation alone, one after the other.
  std::vector<Transcript> alone(kThreads);
  for (int s = 0; s < kThreads; ++s) {
    Session session(*program_);
    ASSERT_EQ(session.error(), "");
    alone[s] = session.Run(s);
    ASSERT_EQ(session.error(), "") << "session " << s << " alone";
    ASSERT_EQ(alone[s].caches, Expected(s).caches) << "session " << s << " alone";
    ASSERT_EQ(alone[s].ys, Expected(s).ys) << "session " << s << " alone";
  }
  // Concurrently: every thread loads its method and runs its conversation at the same time,
  // twice over (so loads overlap executes too).
  for (int round = 0; round < 2; ++round) {
    std::vector<Transcript> together(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int s = 0; s < kThreads; ++s) {
      threads.emplace_back([&, s] {
        Session session(*program_);
        if (session.error().empty()) together[s] = session.Run(s);
        errors[s] = session.error();
      });
    }
    for (std::thread& t : threads) t.join();
    for (int s = 0; s < kThreads; ++s) {
      EXPECT_EQ(errors[s], "") << "session " << s << ", round " << round;
      EXPECT_EQ(together[s].caches, alone[s].caches) << "session " << s << ", round " << round;
      EXPECT_EQ(together[s].ys, alone[s].ys) << "session " << s << ", round " << round;
    }
  }
}

// The sessions really differ (so equal results above are not one session's results seen
// several times).
TEST_F(ConcurrentSessionsTest, ConversationsDiffer) {
  for (int s = 1; s < kThreads; ++s) EXPECT_NE(Expected(s).ys, Expected(0).ys) << s;
}

}  // namespace
}  // namespace executorch_trt
