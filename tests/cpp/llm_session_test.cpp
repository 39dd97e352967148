// Copyright (c) executorch-trt authors.
//
// extension/llm's LlmProgram and Session on real programs (run on the portable engine, CPU):
//   - the example program (examples/kv_cache_decode.pte: prefill/decode, no metadata methods,
//     so max_context_len 128 is given; per-layer cumulative_length step counters besides the
//     KV caches): greedy generation equals the eager reference's tokens and logits;
//     rewind-then-continue equals a fresh session fed the kept tokens (logits and state); a
//     fork and its parent diverge independently; save -> load -> continue equals
//     uninterrupted; damaged and other programs' files are refused naming the problem, with a
//     live session untouched; two sessions on two threads equal each alone; bad use is refused
//     with the reason; the same model with a prefill exported for one length runs longer
//     prompts in chunks of it;
//   - a forward-form program with ExecuTorch's LLM metadata methods and a non-positional
//     buffer that is not a counter (testdata/make_llm_testdata.py): the metadata is read,
//     greedy generation equals eager and stops at get_eos_ids, and rewind restores that buffer
//     from a snapshot and runs the tokens after it again, also after a save and a load;
//   - programs whose buffers only running tokens can classify
//     (testdata/make_probed_llm_testdata.py): a key cache stored transposed with as many
//     positions as its head (the probe finds each cache's position dimension, and a fork keeps
//     the right entries); a run count per position and a sum of ids (kept whole: a rewind and
//     a fork equal a fresh session fed the same tokens).
// Cross-language session files (Python <-> C++) are tested by //tests/py:llm_session_cpp_test.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/runtime.h>

#include "extension/llm/blake2b_256.h"
#include "extension/llm/llm_program.h"
#include "extension/llm/session.h"

namespace executorch_trt {
namespace {

using extension::BufferBinding;
using extension::NamedBuffer;
using extension::llm::BufferLayout;
using extension::llm::BufferRole;
using extension::llm::LlmProgram;
using extension::llm::Session;
using extension::llm::StateLayout;

constexpr char kExample[] = "examples/kv_cache_decode.pte";
constexpr char kExampleReference[] = "examples/kv_cache_decode_reference.json";
constexpr char kStaticPrefill[] = "examples/kv_cache_static_prefill.pte";
constexpr char kCounting[] = "tests/cpp/testdata/counting_llm.pte";
constexpr char kCountingReference[] = "tests/cpp/testdata/counting_llm_reference.json";
constexpr char kTransposed[] = "tests/cpp/testdata/transposed_key_llm.pte";
constexpr char kPositionCounts[] = "tests/cpp/testdata/position_counts_llm.pte";
constexpr char kTokenSum[] = "tests/cpp/testdata/token_sum_llm.pte";
constexpr char kPaddingId[] = "tests/cpp/testdata/padding_id_llm.pte";
constexpr char kValidity[] = "tests/cpp/testdata/validity_llm.pte";
constexpr int64_t kExampleContext = 128;

nlohmann::json ReadJson(const char* path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<int64_t> Ids(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::shared_ptr<LlmProgram> Load(const std::string& path, int64_t max_context_len = 0) {
  executorch::runtime::runtime_init();
  std::string error;
  auto program = LlmProgram::Load(path, &error, "", max_context_len);
  EXPECT_TRUE(program.ok()) << error;
  return program.ok() ? program.get() : nullptr;
}

// max|got - want| <= 1e-4 * max(1, max|want|), as executorch_trt.llm's tests compare logits.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 1.0f;
  float diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    diff = std::max(diff, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(diff, 1e-4f * scale) << what << ": max |dlogit| " << diff;
}

std::vector<float> Logits(Result<std::vector<float>> result, const std::string& error) {
  EXPECT_TRUE(result.ok()) << error;
  return result.ok() ? result.get() : std::vector<float>();
}

std::vector<float> PrefillOk(Session& s, const std::vector<int64_t>& ids) {
  std::string error;
  return Logits(s.Prefill(ids, &error), error);
}

std::vector<float> DecodeOk(Session& s, int64_t id) {
  std::string error;
  return Logits(s.Decode(id, &error), error);
}

std::vector<int64_t> GenerateOk(Session& s, int64_t n, const std::vector<int64_t>& stop = {}) {
  std::string error;
  auto tokens = s.Generate(n, stop, &error);
  EXPECT_TRUE(tokens.ok()) << error;
  return tokens.ok() ? tokens.get() : std::vector<int64_t>();
}

void RewindOk(Session& s, int64_t n) {
  std::string error;
  EXPECT_EQ(s.Rewind(n, &error), Error::Ok) << error;
}

std::vector<uint8_t> Held(const Session& s, const std::string& name) {
  std::string error;
  auto held = s.HeldBuffer(name, &error);
  EXPECT_TRUE(held.ok()) << error;
  return held.ok() ? held.get() : std::vector<uint8_t>();
}

// `a` and `b` hold the same tokens and the same held state: float buffers (the caches) to
// 1e-5, every other buffer (the step counters) exactly. `exact`: floats bit for bit too.
void ExpectSameState(const Session& a, const Session& b, const std::string& what,
                     bool exact = false) {
  EXPECT_EQ(a.tokens(), b.tokens()) << what;
  for (const BufferLayout& buffer : a.program()->layout().buffers()) {
    const std::vector<uint8_t> x = Held(a, buffer.name);
    const std::vector<uint8_t> y = Held(b, buffer.name);
    ASSERT_EQ(x.size(), y.size()) << what << ": " << buffer.name;
    if (buffer.dtype != ScalarType::Float || exact) {
      EXPECT_TRUE(x == y) << what << ": " << buffer.name << " differs";
      continue;
    }
    const auto* fx = reinterpret_cast<const float*>(x.data());
    const auto* fy = reinterpret_cast<const float*>(y.data());
    float diff = 0.0f;
    for (size_t i = 0; i < x.size() / sizeof(float); ++i) {
      diff = std::max(diff, std::fabs(fx[i] - fy[i]));
    }
    EXPECT_LE(diff, 1e-5f) << what << ": " << buffer.name;
  }
}

// A directory of its own for each test's files.
std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") + "/llm_session_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr);
  return dir;
}

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Rewrites the JSON header of the session file at `path` with `edit` and seals it again under
// a valid BLAKE2b-256 (session_file.h: magic, version, reserved, header_size u64 at 16, the
// header at 24, the data, the checksum), so that what the reader checks after the checksum is
// what is tested.
template <typename Edit>
void RewriteHeader(const std::string& path, Edit edit) {
  const std::vector<char> file = ReadFile(path);
  ASSERT_GT(file.size(), 24u + 32u);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | static_cast<uint8_t>(file[16 + i]);
  }
  ASSERT_LE(24 + header_size + 32, file.size());
  nlohmann::ordered_json header =
      nlohmann::ordered_json::parse(file.begin() + 24, file.begin() + 24 + header_size);
  edit(header);
  const std::string text = header.dump();
  std::vector<char> out(file.begin(), file.begin() + 16);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff));
  }
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), file.begin() + 24 + header_size, file.end() - 32);
  extension::llm::Blake2b256 hash;
  hash.Update(out.data(), out.size());
  const extension::llm::Blake2b256Digest digest = hash.Digest();
  out.insert(out.end(), digest.begin(), digest.end());
  WriteFile(path, out);
}

// --- the example program ------------------------------------------------------------------

class ExampleProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    program_ = Load(kExample, kExampleContext);
    reference_ = ReadJson(kExampleReference);
  }
  static void TearDownTestSuite() { program_.reset(); }

  void SetUp() override {
    ASSERT_NE(program_, nullptr);
    ASSERT_TRUE(reference_.is_object()) << kExampleReference;
    prompt_ = Ids(reference_["prompt"]);
  }

  std::unique_ptr<Session> Fresh(const std::vector<int64_t>& ids) {
    auto s = program_->NewSession();
    PrefillOk(*s, ids);
    return s;
  }

  static std::shared_ptr<LlmProgram> program_;
  static nlohmann::json reference_;
  std::vector<int64_t> prompt_;
};

std::shared_ptr<LlmProgram> ExampleProgramTest::program_;
nlohmann::json ExampleProgramTest::reference_;

// The layout takes the roles the probe found, but only where they can hold: a position
// dimension of the capacity, a counter that is an integer scalar and not positional.
TEST(StateLayoutTest, TheRolesTheProbeFoundWhereTheyCanHold) {
  std::vector<NamedBuffer> buffers;
  for (const auto& [dtype, sizes] :
       std::vector<std::pair<ScalarType, std::vector<int64_t>>>{{ScalarType::Float, {1, 2, 8, 8}},
                                                                {ScalarType::Float, {1, 8, 2, 8}},
                                                                {ScalarType::Float, {1, 2, 8, 4}},
                                                                {ScalarType::Long, {}},
                                                                {ScalarType::Float, {}},
                                                                {ScalarType::Int, {1}}}) {
    NamedBuffer b;
    b.name = "b" + std::to_string(buffers.size());
    b.dtype = dtype;
    b.sizes = sizes;
    b.nbytes = executorch::runtime::elementSize(dtype);
    for (int64_t size : sizes) b.nbytes *= static_cast<size_t>(size);
    buffers.push_back(b);
  }
  const StateLayout layout = StateLayout::Of(
      buffers, 8, {{3, true}, {2, false}, {1, false}, {-1, true}, {-1, true}, {-1, true}});
  std::vector<std::pair<int, bool>> roles;
  for (const BufferLayout& b : layout.buffers()) roles.emplace_back(b.positional_dim, b.counter);
  EXPECT_EQ(roles, (std::vector<std::pair<int, bool>>{
                       {3, false}, {-1, false}, {-1, false}, {-1, true}, {-1, false}, {-1, true}}));
  EXPECT_EQ(layout.other(), (std::vector<size_t>{1, 2, 3, 4, 5}));
  // Fewer roles than buffers: the rest are other buffers.
  EXPECT_EQ(StateLayout::Of(buffers, 8, {}).other().size(), buffers.size());
}

// Buffers that a token writes in different ways, run through the probe's protocol (Prepare,
// one token, Observe) as LlmProgram runs a program: only the caches written once at the
// token's position are positional, only the scalar counting tokens is a counter.
TEST(StateProbeTest, PositionalIsWrittenOnceAtTheTokensPositionACounterCountsTokens) {
  constexpr int64_t kCapacity = 8;
  struct Buffer {
    const char* name;
    ScalarType dtype;
    std::vector<int64_t> sizes;
    BufferRole want;
  };
  const std::vector<Buffer> specs = {
      {"cache", ScalarType::Float, {1, kCapacity, 2}, {1, false}},
      {"counted_cache", ScalarType::Float, {1, kCapacity, 2}, {1, false}},  // at `count`
      {"transposed", ScalarType::Float, {1, kCapacity, kCapacity}, {2, false}},
      {"table", ScalarType::Float, {kCapacity}, {-1, false}},    // indexed by token id
      {"runs", ScalarType::Float, {kCapacity}, {-1, false}},     // += 1 at the position
      {"ring", ScalarType::Float, {kCapacity, 2}, {-1, false}},  // at kCapacity - 1 - p
      {"count", ScalarType::Long, {}, {-1, true}},
      {"sum", ScalarType::Long, {}, {-1, false}},  // += token id
  };
  std::vector<NamedBuffer> buffers;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<BufferBinding> state;
  for (const Buffer& spec : specs) {
    NamedBuffer b;
    b.name = spec.name;
    b.dtype = spec.dtype;
    b.sizes = spec.sizes;
    b.nbytes = executorch::runtime::elementSize(spec.dtype);
    for (int64_t size : spec.sizes) b.nbytes *= static_cast<size_t>(size);
    buffers.push_back(b);
    bytes.emplace_back(b.nbytes, 0);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    state.push_back({buffers[i].name, bytes[i].data(), bytes[i].size()});
  }
  auto f32 = [&](size_t i) { return reinterpret_cast<float*>(bytes[i].data()); };
  auto i64 = [&](size_t i) { return reinterpret_cast<int64_t*>(bytes[i].data()); };
  auto run = [&](int64_t token, int64_t p) {
    const float v = static_cast<float>(token + 1);
    const int64_t at = *i64(6);
    for (int64_t d = 0; d < 2; ++d) {
      f32(0)[p * 2 + d] = v;
      f32(1)[at * 2 + d] = v;
      f32(5)[(kCapacity - 1 - p) * 2 + d] = v;
    }
    for (int64_t r = 0; r < kCapacity; ++r) f32(2)[r * kCapacity + p] = v + r;
    f32(3)[token] = 1.0f;
    f32(4)[p] += 1.0f;
    *i64(6) += 1;
    *i64(7) += token;
  };
  extension::llm::StateProbe probe(buffers, kCapacity);
  const auto sets = extension::llm::StateProbe::TokenSets(48);
  EXPECT_EQ(sets, (std::vector<std::array<int64_t, 3>>{{2, 3, 3}, {24, 25, 25}, {46, 47, 47}}));
  const std::array<int64_t, 3> tokens = sets.front();
  for (size_t k = 0; k < tokens.size(); ++k) {
    probe.Prepare(state);
    run(tokens[k], extension::llm::StateProbe::kPositions[k]);
    probe.Observe(state);
  }
  const std::vector<BufferRole> roles = probe.Roles();
  ASSERT_EQ(roles.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(roles[i].positional_dim, specs[i].want.positional_dim) << specs[i].name;
    EXPECT_EQ(roles[i].counter, specs[i].want.counter) << specs[i].name;
  }
  // Before the repeated token the counter was put back to one token, so it counts two.
  EXPECT_EQ(*i64(6), 2);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_FALSE(probe.Silent(i)) << specs[i].name;
  }
  EXPECT_EQ(extension::llm::StateProbe::TokenSets(3),
            (std::vector<std::array<int64_t, 3>>{{2, 2, 2}}));
  EXPECT_EQ(extension::llm::StateProbe::TokenSets(4),
            (std::vector<std::array<int64_t, 3>>{{2, 3, 3}}));
}

// The dimension one token wrote: the one along which exactly one index changed, the token's
// position (a write at another index, as a ring buffer or a sink slot makes, decides nothing).
TEST(StateLayoutTest, WrittenDimIsTheDimensionWithOneChangedIndexAtThePosition) {
  BufferLayout b;
  b.sizes = {1, 4, 4};
  b.element_size = sizeof(float);
  b.nbytes = 16 * sizeof(float);
  const std::vector<float> before(16, 0.0f);
  auto written = [&](const std::vector<float>& after, int64_t position = 0) {
    return extension::llm::WrittenDim(b, reinterpret_cast<const uint8_t*>(before.data()),
                                      reinterpret_cast<const uint8_t*>(after.data()), {1, 2},
                                      position);
  };
  std::vector<float> column = before, row = before, one = before, negative_zero = before,
                     last = before;
  for (int i = 0; i < 4; ++i) {
    column[i * 4] = 1.0f + i;    // [0, i, 0]: index 0 along the last dimension
    row[i] = 1.0f + i;           // [0, 0, i]: index 0 along the middle one
    last[i * 4 + 3] = 1.0f + i;  // [0, i, 3]: index 3 along the last dimension
  }
  one[0] = 1.0f;                                // a single entry says nothing
  negative_zero[0] = negative_zero[3] = -0.0f;  // bits differ from 0.0f
  EXPECT_EQ(written(column), 2);
  EXPECT_EQ(written(row), 1);
  EXPECT_EQ(written(one), -1);
  EXPECT_EQ(written(before), -1);
  EXPECT_EQ(written(negative_zero), 1);
  EXPECT_EQ(written(last), -1);
  EXPECT_EQ(written(last, 3), 2);
}

// k_cache [1, D, S] and v_cache [1, S, D] with D == S == 16: the probe tokens tell which
// dimension is the position, and a fork keeps the held positions along it (a wrong one shows
// in the fork's logits against a fresh session fed the same tokens).
TEST(StateLayoutTest, ATransposedKeyCacheIsPositionalAlongItsLastDimension) {
  auto program = Load(kTransposed);
  ASSERT_NE(program, nullptr);
  std::vector<std::pair<std::string, int>> dims;
  for (const BufferLayout& b : program->layout().buffers()) {
    dims.emplace_back(b.name, b.positional_dim);
  }
  std::sort(dims.begin(), dims.end());
  EXPECT_EQ(dims, (std::vector<std::pair<std::string, int>>{
                      {"count", -1}, {"k_cache", 2}, {"v_cache", 1}}));
  const std::vector<int64_t> prompt = {3, 7, 11, 19, 23, 29};
  auto s = program->NewSession();
  PrefillOk(*s, prompt);
  RewindOk(*s, 3);
  std::unique_ptr<Session> fork = s->Fork();
  DecodeOk(*s, 5);  // the parent overwrites position 3 after the fork
  ExpectClose(DecodeOk(*fork, 12), PrefillOk(*program->NewSession(), {3, 7, 11, 12}),
              "rewind(3), fork");
}

// A run count per position ([48], an accumulating write at the position) and a sum of ids (an
// int64 scalar that equals the token count for this prompt): neither is a KV cache or a counter,
// so both are kept whole, and a rewind or a fork equals a fresh session fed the same tokens.
TEST(StateProbeTest, BuffersThatOnlyLookLikeCachesOrCountersAreKeptWhole) {
  for (const char* path : {kPositionCounts, kTokenSum}) {
    SCOPED_TRACE(path);
    auto program = Load(path);
    ASSERT_NE(program, nullptr);
    std::vector<std::tuple<std::string, int, bool>> roles;
    for (const BufferLayout& b : program->layout().buffers()) {
      roles.emplace_back(b.name, b.positional_dim, b.counter);
    }
    std::sort(roles.begin(), roles.end());
    EXPECT_EQ(roles, (std::vector<std::tuple<std::string, int, bool>>{
                         {"extra", -1, false}, {"k_cache", 1, false}, {"v_cache", 1, false}}));
    const std::vector<int64_t> prompt = {0, 0, 0, 3, 2, 1};
    auto s = program->NewSession();
    PrefillOk(*s, prompt);
    RewindOk(*s, 3);
    ExpectClose(DecodeOk(*s, 5), PrefillOk(*program->NewSession(), {0, 0, 0, 5}), "rewind(3)");
    std::unique_ptr<Session> fork = s->Fork();
    DecodeOk(*s, 9);
    ExpectClose(DecodeOk(*fork, 12), PrefillOk(*program->NewSession(), {0, 0, 0, 5, 12}), "fork");
  }
}

// Attention sees every entry a validity buffer (positional, [48]) marks, so the program reads
// past its position: after a rewind the dropped positions' entries are back at their initial
// values in every positional buffer, and so are those of the tokens the rewind runs again
// (its `total` buffer is restored from a snapshot, or from the initial values without one);
// the next token equals a fresh session's.
TEST(StateProbeTest, ARewindResetsTheDroppedEntriesForAProgramThatReadsPastItsPosition) {
  auto program = Load(kValidity);
  ASSERT_NE(program, nullptr);
  const StateLayout& layout = program->layout();
  const size_t extra = layout.Find("extra");
  ASSERT_LT(extra, layout.buffers().size());
  EXPECT_EQ(layout.buffers()[extra].positional_dim, 0);
  const std::vector<int64_t> prompt = {3, 7, 11, 19, 23, 29, 31, 37, 41, 43, 2, 5};
  for (const size_t budget : {Session::kSnapshotBudget, size_t{0}}) {
    SCOPED_TRACE("snapshot budget " + std::to_string(budget));
    auto s = program->NewSession();
    s->set_snapshot_budget(budget);
    PrefillOk(*s, prompt);  // two chunks: 8 + 4
    DecodeOk(*s, 13);
    for (const auto& [n, token] : std::vector<std::pair<int64_t, int64_t>>{{12, 17}, {3, 5}}) {
      RewindOk(*s, n);
      for (size_t i = 0; i < layout.buffers().size(); ++i) {
        const auto* data = static_cast<const uint8_t*>(s->buffer_data(layout.buffers()[i].name));
        size_t nonzero = 0;
        layout.ForEachPiece(i, n, layout.capacity(), [&](size_t offset, size_t size) {
          for (size_t k = 0; k < size; ++k) nonzero += data[offset + k] != 0;
        });
        EXPECT_EQ(nonzero, 0u) << layout.buffers()[i].name << " past " << n << " held tokens";
      }
      const std::vector<int64_t> kept = s->tokens();
      ExpectClose(DecodeOk(*s, token), PrefillOk(*program->NewSession(), Concat(kept, {token})),
                  "rewind(" + std::to_string(n) + ")");
    }
  }
}

// A Llama whose padding id is 2, the first probe token: that token writes zeros into the zero
// caches, so the next token set decides, and every cache is positional along dimension 2.
TEST(StateProbeTest, APaddingIdAmongTheProbeTokensIsDecidedByTheNextSet) {
  auto program = Load(kPaddingId);
  ASSERT_NE(program, nullptr);
  size_t caches = 0;
  for (const BufferLayout& b : program->layout().buffers()) {
    if (b.name.find("cumulative_length") == std::string::npos) {
      ++caches;
      EXPECT_EQ(b.positional_dim, 2) << b.name;
    }
  }
  EXPECT_EQ(caches, 4u);
}

TEST_F(ExampleProgramTest, ReadsTheProgram) {
  const LlmProgram& p = *program_;
  EXPECT_EQ(p.prefill_method(), "prefill");
  EXPECT_EQ(p.decode_method(), "decode");
  EXPECT_EQ(p.max_context_len(), kExampleContext);
  EXPECT_EQ(p.vocab_size(), static_cast<int64_t>(reference_["steps"][0]["logits"].size()));
  EXPECT_TRUE(p.prefill_is_dynamic());
  EXPECT_FALSE(p.bos_id().has_value());
  EXPECT_TRUE(p.eos_ids().empty());
  size_t positional = 0;
  for (const BufferLayout& b : p.layout().buffers()) {
    if (b.positional()) {
      ++positional;
      EXPECT_NE(b.name.find("cache"), std::string::npos) << b.name;
    } else {
      EXPECT_NE(b.name.find("cumulative_length"), std::string::npos) << b.name;
    }
  }
  EXPECT_EQ(positional, reference_["caches"].size());
  EXPECT_FALSE(p.layout().other().empty()) << "the step counters";
}

TEST_F(ExampleProgramTest, AProgramWithoutMetadataNeedsMaxContextLen) {
  std::string error;
  auto program = LlmProgram::Load(kExample, &error);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error(), Error::InvalidArgument);
  EXPECT_NE(error.find("pass max_context_len"), std::string::npos) << error;
}

TEST_F(ExampleProgramTest, AMaxContextLenBelowTwoIsRefused) {
  std::string error;
  auto program = LlmProgram::Load(kExample, &error, "", 1);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error(), Error::InvalidArgument);
  EXPECT_NE(error.find("a KV cache of fewer than 2 positions"), std::string::npos) << error;
}

TEST_F(ExampleProgramTest, AMaxContextLenNoBufferHasIsRefused) {
  std::string error;
  auto program = LlmProgram::Load(kExample, &error, "", 100);
  EXPECT_FALSE(program.ok());
  EXPECT_NE(error.find("100 positions (max_context_len) along which each token writes its own "
                       "position's entries (once, overwriting), so none is a KV cache"),
            std::string::npos)
      << error;
}

TEST_F(ExampleProgramTest, GreedyGenerationEqualsTheReference) {
  auto s = program_->NewSession();
  std::vector<const void*> storage;
  for (const BufferLayout& b : program_->layout().buffers()) {
    storage.push_back(s->buffer_data(b.name));
  }
  const auto& steps = reference_["steps"];
  ExpectClose(PrefillOk(*s, prompt_), steps[0]["logits"].get<std::vector<float>>(), "prefill");
  std::vector<int64_t> want;
  for (const auto& step : steps) {
    want.push_back(step["token"].get<int64_t>());
  }
  std::vector<int64_t> streamed;
  std::string error;
  auto got = s->Generate(static_cast<int64_t>(want.size()), {}, &error,
                         [&](int64_t token) { streamed.push_back(token); });
  ASSERT_TRUE(got.ok()) << error;
  EXPECT_EQ(got.get(), want);
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(s->tokens(), Concat(prompt_, want));
  // The state is the session's own memory, updated in place: it never moved.
  for (size_t i = 0; i < storage.size(); ++i) {
    EXPECT_EQ(s->buffer_data(program_->layout().buffers()[i].name), storage[i]);
  }
}

TEST_F(ExampleProgramTest, RewindThenContinueEqualsAFreshSessionFedTheKeptTokens) {
  auto s = Fresh(prompt_);
  GenerateOk(*s, 5);
  const std::vector<int64_t> extra = {21, 8, 30};
  // A generated position, inside the prompt, empty.
  for (int64_t n : {static_cast<int64_t>(prompt_.size()) + 2, int64_t{4}, int64_t{0}}) {
    const std::string what = "rewind(" + std::to_string(n) + ")";
    RewindOk(*s, n);
    EXPECT_EQ(s->position(), n);
    const std::vector<int64_t> kept = s->tokens();
    const std::vector<float> got = PrefillOk(*s, extra);
    auto fresh = program_->NewSession();
    ExpectClose(got, PrefillOk(*fresh, Concat(kept, extra)), what + " vs fresh");
    ExpectSameState(*s, *fresh, what + " vs fresh");
    EXPECT_EQ(GenerateOk(*s, 6), GenerateOk(*fresh, 6)) << what;
  }
}

TEST_F(ExampleProgramTest, GenerateAfterRewindRecomputesTheLastLogits) {
  auto s = Fresh(prompt_);
  RewindOk(*s, 4);
  auto fresh = Fresh(std::vector<int64_t>(prompt_.begin(), prompt_.begin() + 4));
  EXPECT_EQ(GenerateOk(*s, 4), GenerateOk(*fresh, 4));
}

TEST_F(ExampleProgramTest, AForkAndItsParentDivergeIndependently) {
  auto parent = Fresh(prompt_);
  std::unique_ptr<Session> child = parent->Fork();
  EXPECT_EQ(child->tokens(), parent->tokens());
  ExpectSameState(*child, *parent, "the fork", /*exact=*/true);
  for (const BufferLayout& b : program_->layout().buffers()) {
    EXPECT_NE(child->buffer_data(b.name), parent->buffer_data(b.name)) << b.name;
  }
  const std::vector<float> a = DecodeOk(*parent, 40);
  const std::vector<float> b = DecodeOk(*child, 41);
  ExpectClose(a, PrefillOk(*program_->NewSession(), Concat(prompt_, {40})), "parent");
  ExpectClose(b, PrefillOk(*program_->NewSession(), Concat(prompt_, {41})), "child");
  RewindOk(*parent, 3);
  PrefillOk(*parent, {7, 7, 7, 7});
  ExpectClose(DecodeOk(*child, 42), PrefillOk(*program_->NewSession(), Concat(prompt_, {41, 42})),
              "the child after its parent rewound and went on");
}

TEST_F(ExampleProgramTest, SaveThenLoadContinuesAsUninterrupted) {
  auto s = Fresh(prompt_);
  GenerateOk(*s, 4);
  const std::string path = TempDir() + "/chat.session";
  std::string error;
  ASSERT_EQ(s->Save(path, &error), Error::Ok) << error;
  auto loaded = program_->LoadSession(path, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  Session& t = *loaded.get();
  ExpectSameState(t, *s, "loaded", /*exact=*/true);
  EXPECT_EQ(GenerateOk(t, 10), GenerateOk(*s, 10));
  EXPECT_EQ(DecodeOk(t, 17), DecodeOk(*s, 17));
}

TEST_F(ExampleProgramTest, ASaveThatFailsLeavesThePreviousFileAndNoTemporary) {
  const std::string dir = TempDir();
  auto s = Fresh(prompt_);
  std::string error;
  ASSERT_EQ(s->Save(dir + "/chat.session", &error), Error::Ok) << error;
  // A name longer than the file system takes: the rename fails after the temporary was written.
  EXPECT_EQ(s->Save(dir + "/" + std::string(300, 'x'), &error), Error::AccessFailed);
  EXPECT_NE(error.find("cannot write the session file"), std::string::npos) << error;
  EXPECT_EQ(s->Save(dir + "/missing/chat.session", &error), Error::AccessFailed);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"chat.session"}));
  auto loaded = program_->LoadSession(dir + "/chat.session", &error);
  ASSERT_TRUE(loaded.ok()) << error;
  EXPECT_EQ(loaded.get()->tokens(), prompt_);
}

TEST_F(ExampleProgramTest, SaveWritesAnOwnerOnlyFile) {
  const std::string path = TempDir() + "/chat.session";
  std::string error;
  ASSERT_EQ(Fresh(prompt_)->Save(path, &error), Error::Ok) << error;
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
}

TEST_F(ExampleProgramTest, SaveRefusesATargetThatIsNotARegularFile) {
  const std::string dir = TempDir();
  auto s = Fresh(prompt_);
  std::string error;
  std::filesystem::create_directory(dir + "/a directory");
  ASSERT_EQ(::mkfifo((dir + "/a fifo").c_str(), 0600), 0);
  ASSERT_EQ(s->Save(dir + "/regular", &error), Error::Ok) << error;
  std::filesystem::create_symlink(dir + "/a directory", dir + "/link to a directory");
  std::filesystem::create_symlink(dir + "/regular", dir + "/link to a file");
  for (const char* name : {"a directory", "a fifo", "link to a directory"}) {
    const std::string path = dir + "/" + name;
    error.clear();
    EXPECT_EQ(s->Save(path, &error), Error::InvalidArgument) << name;
    EXPECT_NE(error.find(path + " exists and is not a regular file"), std::string::npos) << error;
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/a directory"));
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/a directory"));
  EXPECT_TRUE(std::filesystem::is_fifo(dir + "/a fifo"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link to a directory"));
  // A link to a regular file is replaced like one (the link, not its target).
  const std::vector<char> target = ReadFile(dir + "/regular");
  PrefillOk(*s, {3});
  ASSERT_EQ(s->Save(dir + "/link to a file", &error), Error::Ok) << error;
  EXPECT_FALSE(std::filesystem::is_symlink(dir + "/link to a file"));
  EXPECT_EQ(ReadFile(dir + "/regular"), target);
  auto loaded = program_->LoadSession(dir + "/link to a file", &error);
  ASSERT_TRUE(loaded.ok()) << error;
  EXPECT_EQ(loaded.get()->tokens(), Concat(prompt_, {3}));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a directory", "a fifo", "link to a directory",
                                             "link to a file", "regular"}))
      << "no temporary left";
}

TEST_F(ExampleProgramTest, LoadingADirectoryOrAFifoSaysWhy) {
  const std::string dir = TempDir();
  std::string error;
  auto loaded = program_->LoadSession(dir, &error);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error(), Error::AccessFailed);
  EXPECT_EQ(error, dir + ": cannot read the session file (Is a directory)");
  // A fifo is not waited on (no writer ever comes) nor read.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = program_->LoadSession(fifo, &error);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_EQ(from_fifo.error(), Error::AccessFailed);
  EXPECT_EQ(error, fifo + ": cannot read the session file (not a regular file)");
}

TEST_F(ExampleProgramTest, DamagedAndForeignFilesAreRefusedAndNothingChanges) {
  const std::string dir = TempDir();
  const std::string path = dir + "/chat.session";
  auto saved = Fresh(prompt_);
  std::string error;
  ASSERT_EQ(saved->Save(path, &error), Error::Ok) << error;
  auto live = Fresh({1, 2, 3});
  std::unique_ptr<Session> before = live->Fork();
  const std::vector<char> data = ReadFile(path);
  ASSERT_GT(data.size(), 200u);
  std::vector<char> flipped = data;
  flipped[data.size() / 2] ^= 0x40;
  std::vector<char> newer = data;
  newer[8] = 2;  // version u32 at offset 8, little-endian
  const struct {
    const char* name;
    std::vector<char> bytes;
    std::vector<std::string> expect;
  } cases[] = {
      {"truncated", std::vector<char>(data.begin(), data.end() - 100), {"truncated or corrupted"}},
      {"corrupted", flipped, {"truncated or corrupted"}},
      {"tiny", std::vector<char>(data.begin(), data.begin() + 10), {"truncated: 10 bytes"}},
      {"not a session", std::vector<char>(100, 'x'), {"not a session file"}},
      {"newer", newer, {"newer executorch_trt", "version 2"}},
  };
  for (const auto& c : cases) {
    const std::string p = dir + "/" + c.name;
    WriteFile(p, c.bytes);
    auto loaded = program_->LoadSession(p, &error);
    ASSERT_FALSE(loaded.ok()) << c.name;
    EXPECT_EQ(loaded.error(), Error::InvalidArgument) << c.name;
    for (const std::string& text : c.expect) {
      EXPECT_NE(error.find(text), std::string::npos) << c.name << ": " << error;
    }
    EXPECT_EQ(error.rfind(p, 0), 0u) << "names the file: " << error;
  }
  auto missing = program_->LoadSession(dir + "/no such file", &error);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), Error::AccessFailed);
  // The same model exported with a static prefill: another program.
  std::shared_ptr<LlmProgram> other = Load(kStaticPrefill, kExampleContext);
  ASSERT_NE(other, nullptr);
  auto foreign = other->LoadSession(path, &error);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(error.find("saved from another program"), std::string::npos) << error;
  EXPECT_NE(error.find("the .pte differs"), std::string::npos) << error;
  ExpectSameState(*live, *before, "the live session after the refusals", /*exact=*/true);
  ExpectClose(DecodeOk(*live, 4), PrefillOk(*program_->NewSession(), {1, 2, 3, 4}),
              "the live session after the refusals");
}

TEST_F(ExampleProgramTest, TwoSessionsOnTwoThreadsEqualEachAlone) {
  const std::vector<std::vector<int64_t>> prompts = {prompt_, {5, 30, 31, 2, 2, 5}};
  constexpr int64_t kSteps = 40;
  std::vector<std::vector<int64_t>> alone;
  for (const auto& prompt : prompts) {
    alone.push_back(GenerateOk(*Fresh(prompt), kSteps));
  }
  std::vector<std::vector<int64_t>> results(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < 2; ++k) {
    threads.emplace_back([&, k] {
      auto s = program_->NewSession();
      std::string error;
      if (!s->Prefill(prompts[k], &error).ok()) {
        errors[k] = error;
        return;
      }
      auto tokens = s->Generate(kSteps, {}, &error);
      if (tokens.ok()) {
        results[k] = tokens.get();
      } else {
        errors[k] = error;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(results, alone);
}

TEST_F(ExampleProgramTest, BadUseIsRefusedWithTheReason) {
  auto s = program_->NewSession();
  std::string error;
  const auto refused = [&](Error got, Error want, const std::string& text) {
    EXPECT_EQ(got, want) << text;
    EXPECT_NE(error.find(text), std::string::npos) << error;
  };
  refused(s->Decode(1, &error).error(), Error::InvalidState,
          "decode: the session holds no tokens; prefill a prompt first");
  refused(s->Generate(3, {}, &error).error(), Error::InvalidState,
          "generate: the session holds no tokens; prefill a prompt first");
  refused(s->Prefill({}, &error).error(), Error::InvalidArgument, "prefill: no tokens given");
  const int64_t vocab = program_->vocab_size();
  refused(s->Prefill({1, vocab}, &error).error(), Error::InvalidArgument,
          "prefill: token 1 is " + std::to_string(vocab) + ", outside the vocabulary [0, " +
              std::to_string(vocab) + ")");
  refused(s->Prefill({-1}, &error).error(), Error::InvalidArgument, "token 0 is -1");
  refused(s->Prefill(std::vector<int64_t>(kExampleContext + 1, 1), &error).error(),
          Error::InvalidArgument,
          "prefill: 129 tokens do not fit: the session holds 0 of 128 positions "
          "(max_context_len), so 128 more fit");
  EXPECT_EQ(s->position(), 0);
  PrefillOk(*s, {1, 2, 3});
  refused(s->Rewind(4, &error), Error::InvalidArgument,
          "rewind(4): the session holds 3 tokens; n must be in [0, 3]");
  refused(s->Rewind(-1, &error), Error::InvalidArgument, "rewind(-1)");
  refused(s->Generate(-1, {}, &error).error(), Error::InvalidArgument,
          "generate: max_new_tokens must be >= 0, got -1");
  refused(s->Decode(vocab + 5, &error).error(), Error::InvalidArgument, "decode: token 0 is");
  EXPECT_EQ(s->tokens(), (std::vector<int64_t>{1, 2, 3}));
  auto unknown = s->HeldBuffer("no_such_buffer", &error);
  EXPECT_EQ(unknown.error(), Error::NotFound);
}

TEST_F(ExampleProgramTest, GenerateStopsWhenTheCacheIsFull) {
  auto s = Fresh(std::vector<int64_t>(kExampleContext - 3, 1));
  EXPECT_EQ(GenerateOk(*s, 10).size(), 3u);
  EXPECT_EQ(s->position(), kExampleContext);
  std::string error;
  EXPECT_EQ(s->Decode(1, &error).error(), Error::InvalidArgument);
  EXPECT_NE(error.find("so 0 more fit"), std::string::npos) << error;
}

TEST_F(ExampleProgramTest, AStaticPrefillRunsPromptsInChunksOfItsLength) {
  std::shared_ptr<LlmProgram> fixed = Load(kStaticPrefill, kExampleContext);
  ASSERT_NE(fixed, nullptr);
  EXPECT_FALSE(fixed->prefill_is_dynamic());
  EXPECT_EQ(fixed->max_seq_len(), static_cast<int64_t>(prompt_.size()));
  // The exported length, then 2 more one at a time through decode, then the length + 1.
  for (const std::vector<int64_t>& prompt :
       {prompt_, Concat(prompt_, {3, 4}), Concat(prompt_, Concat(prompt_, {9}))}) {
    auto s = fixed->NewSession();
    ExpectClose(PrefillOk(*s, prompt), PrefillOk(*program_->NewSession(), prompt),
                std::to_string(prompt.size()) + " tokens");
    EXPECT_EQ(GenerateOk(*s, 3), GenerateOk(*Fresh(prompt), 3));
  }
}

// --- a forward program with metadata and a buffer that is not a counter ---------------------

class CountingProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    program_ = Load(kCounting);
    reference_ = ReadJson(kCountingReference);
  }
  static void TearDownTestSuite() { program_.reset(); }

  void SetUp() override {
    ASSERT_NE(program_, nullptr);
    ASSERT_TRUE(reference_.is_object()) << kCountingReference;
  }

  // A session that has run ten tokens (a prefill of six, four generated).
  static std::unique_ptr<Session> TenTokens() {
    auto s = program_->NewSession();
    PrefillOk(*s, {1, 2, 3, 4, 5, 6});
    GenerateOk(*s, 4);
    return s;
  }

  // `s` saved to `path` (default: counting.session in the test's temporary directory).
  static std::string Saved(Session& s, std::string path = "") {
    if (path.empty()) path = TempDir() + "/counting.session";
    std::string error;
    EXPECT_EQ(s.Save(path, &error), Error::Ok) << error;
    return path;
  }

  static std::shared_ptr<LlmProgram> program_;
  static nlohmann::json reference_;
};

std::shared_ptr<LlmProgram> CountingProgramTest::program_;
nlohmann::json CountingProgramTest::reference_;

TEST_F(CountingProgramTest, ReadsTheMetadataMethods) {
  const LlmProgram& p = *program_;
  EXPECT_EQ(p.prefill_method(), "forward");
  EXPECT_EQ(p.decode_method(), "forward");
  EXPECT_EQ(p.max_seq_len(), reference_["max_seq_len"].get<int64_t>());
  EXPECT_EQ(p.max_context_len(), reference_["max_context_len"].get<int64_t>());
  EXPECT_EQ(p.vocab_size(), reference_["vocab_size"].get<int64_t>());
  EXPECT_EQ(p.bos_id(), reference_["bos_id"].get<int64_t>());
  EXPECT_EQ(p.eos_ids(), Ids(reference_["eos_ids"]));
  EXPECT_TRUE(p.prefill_is_dynamic());
  EXPECT_FALSE(p.positions_are_start());
  std::vector<std::string> other;
  for (size_t i : p.layout().other()) {
    other.push_back(p.layout().buffers()[i].name);
  }
  EXPECT_EQ(other, (std::vector<std::string>{"count", "total"}));
}

TEST_F(CountingProgramTest, GreedyGenerationEqualsEagerAndStopsAtTheEosIds) {
  const std::vector<int64_t> prompt = Ids(reference_["prompt"]);
  const std::vector<int64_t> greedy = Ids(reference_["greedy"]);
  auto s = program_->NewSession();
  PrefillOk(*s, prompt);  // longer than max_seq_len: two calls
  EXPECT_EQ(GenerateOk(*s, static_cast<int64_t>(greedy.size())), greedy);
  auto t = program_->NewSession();
  PrefillOk(*t, prompt);
  const auto stop = reference_["stop_index"].get<size_t>();
  EXPECT_EQ(GenerateOk(*t, static_cast<int64_t>(greedy.size()), program_->eos_ids()),
            std::vector<int64_t>(greedy.begin(), greedy.begin() + stop + 1));
}

// `s` rewound to each of `positions` (a generated position, inside the prompt, inside a
// prefill chunk) then given two tokens equals a fresh session fed the kept tokens and those.
void CheckRewinds(LlmProgram& program, Session& s, const std::string& what) {
  for (int64_t n : {7, 2, 5}) {
    const std::string at = what + " rewind(" + std::to_string(n) + ")";
    RewindOk(s, n);
    auto fresh = program.NewSession();
    const std::vector<float> want = PrefillOk(*fresh, Concat(s.tokens(), {9, 10}));
    ExpectClose(PrefillOk(s, {9, 10}), want, at);
    ExpectSameState(s, *fresh, at);
    EXPECT_EQ(GenerateOk(s, 3), GenerateOk(*fresh, 3)) << at;
  }
}

TEST_F(CountingProgramTest, RewindRestoresOtherStateFromASnapshotAndRunsTheTokensAfterIt) {
  auto s = TenTokens();
  const std::vector<uint8_t> count = Held(*s, "count");
  ASSERT_EQ(count.size(), sizeof(int64_t));
  int64_t value = 0;
  std::memcpy(&value, count.data(), sizeof(value));
  EXPECT_EQ(value, 10);
  CheckRewinds(*program_, *s, "live");
}

TEST_F(CountingProgramTest, ALoadedSessionRewindsIntoItsSavedSnapshots) {
  auto s = TenTokens();
  const std::string path = Saved(*s);
  std::string error;
  auto loaded = program_->LoadSession(path, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  ExpectSameState(*loaded.get(), *s, "loaded", /*exact=*/true);
  CheckRewinds(*program_, *loaded.get(), "loaded");
}

TEST_F(CountingProgramTest, AMaxContextLenThatContradictsTheMetadataIsRefused) {
  executorch::runtime::runtime_init();
  std::string error;
  // 16 is also the head dimension: taken as the positions, it would make `total` positional.
  for (int64_t wrong : {8, 16}) {
    auto program = LlmProgram::Load(kCounting, &error, "", wrong);
    ASSERT_FALSE(program.ok()) << wrong;
    EXPECT_EQ(program.error(), Error::InvalidArgument);
    EXPECT_EQ(error, std::string(kCounting) + ": max_context_len " + std::to_string(wrong) +
                         " contradicts the program's get_max_context_len (32): leave it out or "
                         "pass 32");
  }
  auto same = LlmProgram::Load(kCounting, &error, "", 32);
  ASSERT_TRUE(same.ok()) << error;
  EXPECT_EQ(same.get()->max_context_len(), 32);
}

// Bytes of one snapshot of `program`: every buffer that is not positional, whole.
size_t SnapshotSize(const LlmProgram& program) {
  size_t size = 0;
  for (size_t i : program.layout().other()) {
    size += program.layout().buffers()[i].nbytes;
  }
  return size;
}

TEST_F(CountingProgramTest, ARewindWithoutASnapshotRunsTheTokensAgainFromTheInitialValues) {
  auto s = program_->NewSession();
  s->set_snapshot_budget(0);
  PrefillOk(*s, {1, 2, 3, 4, 5, 6});
  GenerateOk(*s, 4);
  EXPECT_TRUE(s->snapshot_positions().empty());
  EXPECT_EQ(s->snapshot_bytes(), 0u);
  CheckRewinds(*program_, *s, "no snapshots");
  RewindOk(*s, 0);
  auto fresh = program_->NewSession();
  ExpectClose(PrefillOk(*s, {4, 5}), PrefillOk(*fresh, {4, 5}), "rewind(0)");
  ExpectSameState(*s, *fresh, "rewind(0)");
}

TEST_F(CountingProgramTest, ALoadedSessionWithoutSnapshotsRewindsFromTheInitialValues) {
  auto s = TenTokens();
  const std::string path = Saved(*s);
  std::string error;
  // A file that keeps no snapshot (its data stays, unreferenced).
  RewriteHeader(path, [](nlohmann::ordered_json& header) {
    nlohmann::ordered_json kept = nlohmann::ordered_json::array();
    for (const auto& t : header["tensors"]) {
      if (t["role"] != "snapshot") {
        kept.push_back(t);
      }
    }
    header["tensors"] = kept;
  });
  auto loaded = program_->LoadSession(path, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  EXPECT_EQ(loaded.get()->snapshot_positions(), std::vector<int64_t>{10});
  ExpectSameState(*loaded.get(), *s, "loaded", /*exact=*/true);
  CheckRewinds(*program_, *loaded.get(), "loaded without snapshots");
}

TEST_F(CountingProgramTest, SnapshotsStayWithinTheBudgetTheOldestDroppedFirst) {
  const size_t one = SnapshotSize(*program_);
  ASSERT_GT(one, 0u);
  auto s = program_->NewSession();
  EXPECT_EQ(s->snapshot_positions(), std::vector<int64_t>{0});
  s->set_snapshot_budget(3 * one + one / 2);
  PrefillOk(*s, {1, 2, 3, 4, 5, 6});
  for (int64_t token : {7, 8, 9, 10}) {
    DecodeOk(*s, token);
    EXPECT_LE(s->snapshot_bytes(), 3 * one + one / 2);
  }
  EXPECT_EQ(s->snapshot_positions(), (std::vector<int64_t>{8, 9, 10}));
  EXPECT_EQ(s->snapshot_bytes(), 3 * one);
  // A fork has the same snapshots and budget.
  std::unique_ptr<Session> child = s->Fork();
  EXPECT_EQ(child->snapshot_positions(), (std::vector<int64_t>{8, 9, 10}));
  DecodeOk(*child, 11);
  EXPECT_EQ(child->snapshot_positions(), (std::vector<int64_t>{9, 10, 11}));
  // Saved and loaded: the file's snapshots, under the default budget.
  const std::string path = Saved(*s);
  std::string error;
  auto loaded = program_->LoadSession(path, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  EXPECT_EQ(loaded.get()->snapshot_positions(), (std::vector<int64_t>{8, 9, 10}));
  // A rewind before the oldest runs the tokens again from the initial values; the ones after
  // it from a snapshot.
  CheckRewinds(*program_, *s, "bounded");
  EXPECT_LE(s->snapshot_bytes(), 3 * one + one / 2);
  // A budget below one snapshot keeps none.
  s->set_snapshot_budget(one - 1);
  EXPECT_TRUE(s->snapshot_positions().empty());
  DecodeOk(*s, 3);
  EXPECT_TRUE(s->snapshot_positions().empty());
  // The default keeps one after every call here.
  auto t = program_->NewSession();
  PrefillOk(*t, {1, 2, 3});
  DecodeOk(*t, 4);
  EXPECT_EQ(t->snapshot_positions(), (std::vector<int64_t>{0, 3, 4}));
  EXPECT_LE(Session::kSnapshotBudget, size_t{16} << 20);
}

TEST_F(CountingProgramTest, ALoadedFileListingABufferThatIsNotACounterIsRefused) {
  auto s = TenTokens();
  const std::string dir = TempDir();
  const std::string saved = Saved(*s, dir + "/counting.session");
  std::string error;
  const std::vector<char> bytes = ReadFile(saved);
  // `total` is float [1, 16], `k_cache` positional, `nope` not a buffer.
  for (const char* name : {"total", "k_cache", "nope"}) {
    const std::string path = dir + "/" + name;
    WriteFile(path, bytes);
    RewriteHeader(path, [&](nlohmann::ordered_json& header) {
      header["counters"] = {"count", name};
    });
    auto loaded = program_->LoadSession(path, &error);
    ASSERT_FALSE(loaded.ok()) << name;
    EXPECT_EQ(loaded.error(), Error::InvalidArgument) << name;
    EXPECT_EQ(error, path + ": '" + name +
                         "' is listed as a token counter but does not hold the token count (10)");
  }
  // `count` listed (as saved) but holding 9 where 10 tokens are held.
  std::vector<char> patched = bytes;
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | static_cast<uint8_t>(bytes[16 + i]);
  }
  const auto header = nlohmann::json::parse(bytes.begin() + 24, bytes.begin() + 24 + header_size);
  EXPECT_EQ(header["counters"], nlohmann::json::array({"count"}));
  for (const auto& t : header["tensors"]) {
    if (t["role"] == "buffer" && t["name"] == "count") {
      ASSERT_EQ(t["dtype"], "int64");
      patched[24 + header_size + t["offset"].get<size_t>()] = 9;  // little-endian 10 -> 9
    }
  }
  const std::string miscounted = dir + "/miscounted";
  WriteFile(miscounted, patched);
  RewriteHeader(miscounted, [](nlohmann::ordered_json&) {});
  auto refused = program_->LoadSession(miscounted, &error);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(error, miscounted +
                       ": 'count' is listed as a token counter but does not hold the token count "
                       "(10)");
  // As saved, it loads and rewinds.
  auto loaded = program_->LoadSession(saved, &error);
  ASSERT_TRUE(loaded.ok()) << error;
  CheckRewinds(*program_, *loaded.get(), "counters as saved");
}

}  // namespace
}  // namespace executorch_trt
