// Copyright (c) executorch-trt authors.

#include "extension/llm/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace executorch_trt::extension::llm {
namespace {

// The index of the highest logit, the first on a tie; the first NaN when there is one (as
// torch.argmax, which executorch_trt.llm's greedy choice is).
int64_t Argmax(const std::vector<float>& logits) {
  size_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return static_cast<int64_t>(i);
    }
    if (logits[i] > logits[best]) {
      best = i;
    }
  }
  return static_cast<int64_t>(best);
}

}  // namespace

Session::Session(std::shared_ptr<LlmProgram> program, SessionContents contents)
    : program_(std::move(program)), layout_(program_->layout()), contents_(std::move(contents)) {
  for (size_t i : layout_.other()) {
    snapshot_size_ += layout_.buffers()[i].nbytes;
    if (layout_.buffers()[i].counter && IsCount(i, Held())) {
      contents_.counters.insert(layout_.buffers()[i].name);
    }
  }
  for (size_t i = 0; i < layout_.buffers().size(); ++i) {
    const BufferLayout& b = layout_.buffers()[i];
    bindings_.push_back({b.name, contents_.state[i].data(), b.nbytes});
  }
  Record();
}

Session::~Session() = default;

std::unique_ptr<Session> Session::Restored(std::shared_ptr<LlmProgram> program,
                                           SessionContents saved) {
  std::set<std::string> counters = std::move(saved.counters);
  auto snapshots = std::move(saved.snapshots);
  std::optional<std::vector<float>> logits = std::move(saved.logits);
  saved.counters.clear();
  saved.snapshots.clear();
  saved.logits.reset();
  std::unique_ptr<Session> session(new Session(std::move(program), std::move(saved)));
  // The saved bookkeeping, not what the state looks like now: a counter is one that held the
  // token count after every call of the saved session.
  session->contents_.counters = std::move(counters);
  if (!snapshots.empty()) {
    session->contents_.snapshots = std::move(snapshots);
    session->TrimSnapshots();  // a file may hold more than the budget
  }
  session->contents_.logits = std::move(logits);
  return session;
}

int64_t Session::position() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Held();
}

std::vector<int64_t> Session::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return contents_.tokens;
}

Error Session::CheckTokens(const std::vector<int64_t>& ids, const char* call,
                           std::string* error) const {
  if (ids.empty()) {
    *error = std::string(call) + ": no tokens given";
    return Error::InvalidArgument;
  }
  const int64_t vocab = program_->vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      *error = std::string(call) + ": token " + std::to_string(i) + " is " +
               std::to_string(ids[i]) + ", outside the vocabulary [0, " + std::to_string(vocab) +
               ")";
      return Error::InvalidArgument;
    }
  }
  return Error::Ok;
}

Error Session::CheckRoom(size_t count, const char* call, std::string* error) const {
  const int64_t room = layout_.capacity() - Held();
  if (static_cast<int64_t>(count) > room) {
    *error = std::string(call) + ": " + std::to_string(count) +
             " tokens do not fit: the session holds " + std::to_string(Held()) + " of " +
             std::to_string(layout_.capacity()) + " positions (max_context_len), so " +
             std::to_string(room) + " more fit; rewind or start a new session";
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

Result<std::vector<float>> Session::Prefill(const std::vector<int64_t>& tokens,
                                            std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Error err = CheckTokens(tokens, "prefill", error);
  if (err == Error::Ok) {
    err = CheckRoom(tokens.size(), "prefill", error);
  }
  if (err == Error::Ok) {
    err = Advance(tokens, error);
  }
  if (err != Error::Ok) {
    return err;
  }
  return *contents_.logits;
}

Result<std::vector<float>> Session::Decode(int64_t token, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<int64_t> ids = {token};
  Error err = CheckTokens(ids, "decode", error);
  if (err != Error::Ok) {
    return err;
  }
  if (contents_.tokens.empty()) {
    *error = "decode: the session holds no tokens; prefill a prompt first";
    return Error::InvalidState;
  }
  err = CheckRoom(1, "decode", error);
  if (err == Error::Ok) {
    err = Advance(ids, error);
  }
  if (err != Error::Ok) {
    return err;
  }
  return *contents_.logits;
}

Result<std::vector<int64_t>> Session::Generate(int64_t max_new_tokens,
                                               const std::vector<int64_t>& stop_tokens,
                                               std::string* error,
                                               const std::function<void(int64_t)>& on_token) {
  if (max_new_tokens < 0) {
    *error = "generate: max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens);
    return Error::InvalidArgument;
  }
  std::vector<int64_t> generated;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    int64_t token = 0;
    {
      // One step under the lock, as executorch_trt.llm's generator: another call on this
      // session may come between two steps, never inside one.
      std::lock_guard<std::mutex> lock(mu_);
      Error err = CurrentLogits("generate", error);
      if (err != Error::Ok) {
        return err;
      }
      if (Held() >= layout_.capacity()) {
        break;
      }
      token = Argmax(*contents_.logits);
      err = Advance({token}, error);
      if (err != Error::Ok) {
        return err;
      }
    }
    generated.push_back(token);
    if (on_token) {
      on_token(token);
    }
    if (std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end()) {
      break;
    }
  }
  return generated;
}

Error Session::CurrentLogits(const char* call, std::string* error) {
  if (contents_.logits) {
    return Error::Ok;
  }
  if (contents_.tokens.empty()) {
    *error = std::string(call) + ": the session holds no tokens; prefill a prompt first";
    return Error::InvalidState;
  }
  const int64_t last = contents_.tokens.back();
  const Error err = RewindLocked(Held() - 1, error);
  return err != Error::Ok ? err : Advance({last}, error);
}

Error Session::Advance(const std::vector<int64_t>& ids, std::string* error) {
  const auto chunk = static_cast<size_t>(program_->max_seq_len());
  size_t done = 0;
  while (done < ids.size()) {
    size_t n = std::min(ids.size() - done, chunk);
    if (!program_->prefill_is_dynamic() && n > 1 && n < chunk) {
      n = 1;  // a prefill exported for one length takes exactly max_seq_len tokens
    }
    const Error err = RunChunk(ids.data() + done, n, error);
    if (err != Error::Ok) {
      return err;
    }
    done += n;
  }
  return Error::Ok;
}

Error Session::RunChunk(const int64_t* ids, size_t n, std::string* error) {
  std::vector<float> logits;
  const Error err = program_->Run(bindings_, ids, n, Held(), &logits, error);
  if (err != Error::Ok) {
    return err;
  }
  contents_.tokens.insert(contents_.tokens.end(), ids, ids + n);
  contents_.logits = std::move(logits);
  Record();
  return Error::Ok;
}

void Session::Record() {
  for (auto it = contents_.counters.begin(); it != contents_.counters.end();) {
    it = IsCount(layout_.Find(*it), Held()) ? std::next(it) : contents_.counters.erase(it);
  }
  if (!layout_.other().empty() && snapshot_size_ <= snapshot_budget_) {
    // Room first (the oldest go), so that the snapshots never total more than the budget.
    contents_.snapshots.erase(Held());
    while (!contents_.snapshots.empty() &&
           (contents_.snapshots.size() + 1) * snapshot_size_ > snapshot_budget_) {
      contents_.snapshots.erase(contents_.snapshots.begin());
    }
    std::vector<std::vector<uint8_t>> values;
    for (size_t i : layout_.other()) {
      const uint8_t* data = contents_.state[i].data();
      values.emplace_back(data, data + layout_.buffers()[i].nbytes);
    }
    contents_.snapshots[Held()] = std::move(values);
  }
  TrimSnapshots();
}

void Session::TrimSnapshots() {
  if (snapshot_size_ > snapshot_budget_) {
    contents_.snapshots.clear();
    return;
  }
  while (!contents_.snapshots.empty() &&
         contents_.snapshots.size() * snapshot_size_ > snapshot_budget_) {
    contents_.snapshots.erase(contents_.snapshots.begin());
  }
}

void Session::set_snapshot_budget(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_budget_ = bytes;
  TrimSnapshots();
}

size_t Session::snapshot_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return contents_.snapshots.size() * snapshot_size_;
}

std::vector<int64_t> Session::snapshot_positions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> positions;
  for (const auto& [p, values] : contents_.snapshots) {
    positions.push_back(p);
  }
  return positions;
}

bool Session::IsCount(size_t index, int64_t count) const {
  if (index >= layout_.buffers().size()) {
    return false;
  }
  const std::optional<int64_t> value =
      IntegerScalarValue(layout_.buffers()[index], contents_.state[index].data());
  return value == count;
}

void Session::SetCount(size_t index, int64_t count) {
  uint8_t* p = contents_.state[index].data();
  switch (layout_.buffers()[index].dtype) {
    case ScalarType::Long:
      std::memcpy(p, &count, 8);
      break;
    case ScalarType::Int: {
      const auto v = static_cast<int32_t>(count);
      std::memcpy(p, &v, 4);
      break;
    }
    case ScalarType::Short: {
      const auto v = static_cast<int16_t>(count);
      std::memcpy(p, &v, 2);
      break;
    }
    case ScalarType::Char:
    case ScalarType::Byte:
      *p = static_cast<uint8_t>(count);
      break;
    default:
      break;  // IsCount never counts one in
  }
}

Error Session::Rewind(int64_t n, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (n < 0 || n > Held()) {
    *error = "rewind(" + std::to_string(n) + "): the session holds " + std::to_string(Held()) +
             " tokens; n must be in [0, " + std::to_string(Held()) + "]";
    return Error::InvalidArgument;
  }
  return RewindLocked(n, error);
}

Error Session::RewindLocked(int64_t n, std::string* error) {
  if (n == Held()) {
    return Error::Ok;
  }
  const int64_t end = Held();
  // The other buffers that are not counters: restored from a snapshot.
  std::vector<size_t> restore;
  for (size_t k = 0; k < layout_.other().size(); ++k) {
    if (contents_.counters.count(layout_.buffers()[layout_.other()[k]].name) == 0) {
      restore.push_back(k);
    }
  }
  std::vector<int64_t> replay;
  if (!restore.empty()) {
    auto boundary = contents_.snapshots.upper_bound(n);
    int64_t from = 0;
    if (boundary == contents_.snapshots.begin()) {
      // No snapshot at or before n: the program's initial values, the state at position 0.
      for (size_t k : restore) {
        program_->InitialValue(layout_.other()[k], contents_.state[layout_.other()[k]].data());
      }
    } else {
      --boundary;  // the nearest call boundary at or before n
      for (size_t k : restore) {
        const size_t i = layout_.other()[k];
        std::memcpy(contents_.state[i].data(), boundary->second[k].data(),
                    layout_.buffers()[i].nbytes);
      }
      from = boundary->first;
    }
    replay.assign(contents_.tokens.begin() + from, contents_.tokens.begin() + n);
    n = from;
  }
  for (const std::string& name : contents_.counters) {
    SetCount(layout_.Find(name), n);
  }
  // From the replay's start: the tokens run again must not see their own old entries.
  ResetDropped(n, end);
  contents_.tokens.resize(static_cast<size_t>(n));
  contents_.snapshots.erase(contents_.snapshots.upper_bound(n), contents_.snapshots.end());
  contents_.logits.reset();
  return replay.empty() ? Error::Ok : Advance(replay, error);
}

void Session::ResetDropped(int64_t begin, int64_t end) {
  for (size_t i = 0; i < layout_.buffers().size(); ++i) {
    if (!layout_.buffers()[i].positional()) {
      continue;
    }
    const std::vector<uint8_t>& initial = program_->InitialBytes(i);
    uint8_t* data = contents_.state[i].data();
    layout_.ForEachPiece(i, begin, end, [&](size_t offset, size_t size) {
      if (initial.empty()) {
        std::memset(data + offset, 0, size);
      } else {
        std::memcpy(data + offset, initial.data() + offset, size);
      }
    });
  }
}

std::unique_ptr<Session> Session::Fork() {
  std::lock_guard<std::mutex> lock(mu_);
  SessionContents copy;
  copy.tokens = contents_.tokens;
  copy.state = program_->NewState();
  for (size_t i = 0; i < layout_.buffers().size(); ++i) {
    layout_.CopyHeld(i, Held(), contents_.state[i].data(), copy.state[i].data());
  }
  std::unique_ptr<Session> child(new Session(program_, std::move(copy)));
  // The same bookkeeping: the fork has had the same calls.
  child->contents_.counters = contents_.counters;
  child->snapshot_budget_ = snapshot_budget_;
  child->contents_.snapshots = contents_.snapshots;
  child->contents_.logits = contents_.logits;
  return child;
}

Error Session::Save(const std::string& path, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Result<ProgramFingerprint> fingerprint = program_->fingerprint(error);
  if (!fingerprint.ok()) {
    return fingerprint.error();
  }
  return WriteSessionFile(path, layout_, fingerprint.get(), contents_, error);
}

Result<std::vector<uint8_t>> Session::HeldBuffer(std::string_view name, std::string* error) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t i = layout_.Find(name);
  if (i == layout_.buffers().size()) {
    *error = "no buffer named '" + std::string(name) + "'";
    return Error::NotFound;
  }
  std::vector<uint8_t> held;
  held.reserve(layout_.HeldBytes(i, Held()));
  layout_.ForEachHeldPiece(i, Held(), [&](size_t at, size_t size) {
    const uint8_t* data = contents_.state[i].data() + at;
    held.insert(held.end(), data, data + size);
  });
  return held;
}

const void* Session::buffer_data(std::string_view name) const {
  const size_t i = layout_.Find(name);
  return i == layout_.buffers().size() ? nullptr : contents_.state[i].data();
}

}  // namespace executorch_trt::extension::llm
