// Copyright (c) executorch-trt authors.

#include "extension/llm/llm_program.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include <executorch/extension/tensor/tensor_ptr_maker.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/tensor_shape_dynamism.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>

#include "core/common/error_text.h"
#include "core/common/shape_string.h"
#include "extension/llm/blake2b_256.h"
#include "extension/llm/llm_metadata.h"
#include "extension/llm/session.h"

namespace executorch_trt::extension::llm {
namespace {

using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;

// What `meta` declares as its inputs, for messages: "Long [1, 128], Long [128]".
std::string DeclaredInputs(const MethodMeta& meta) {
  std::string s;
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    s += i ? ", " : "";
    Result<executorch::runtime::TensorInfo> info = meta.input_tensor_meta(i);
    if (info.ok()) {
      s += SpecString(info->scalar_type(), info->sizes());
    } else {
      Result<Tag> tag = meta.input_tag(i);
      s += tag.ok() ? executorch::runtime::tag_to_string(tag.get()) : "?";
    }
  }
  return s;
}

// The last row of `out` (its last dimension: the last token's logits) as float32; false for a
// dtype that is not floating point or an empty tensor.
bool LastLogits(const Tensor& out, std::vector<float>* logits) {
  const int64_t vocab = out.size(out.dim() - 1);
  if (vocab < 1 || out.numel() < vocab) {
    return false;
  }
  const size_t first = static_cast<size_t>(out.numel() - vocab);
  logits->resize(static_cast<size_t>(vocab));
  const auto copy = [&](const auto* data) {
    for (int64_t v = 0; v < vocab; ++v) {
      (*logits)[static_cast<size_t>(v)] = static_cast<float>(data[first + v]);
    }
  };
  switch (out.scalar_type()) {
    case ScalarType::Float:
      std::memcpy(logits->data(), out.const_data_ptr<float>() + first, vocab * sizeof(float));
      return true;
    case ScalarType::Double:
      copy(out.const_data_ptr<double>());
      return true;
    case ScalarType::Half:
      copy(out.const_data_ptr<executorch::aten::Half>());
      return true;
    case ScalarType::BFloat16:
      copy(out.const_data_ptr<executorch::aten::BFloat16>());
      return true;
    default:
      return false;
  }
}

}  // namespace

LlmProgram::~LlmProgram() = default;

Result<std::shared_ptr<LlmProgram>> LlmProgram::Load(const std::string& path, std::string* error,
                                                     const std::string& data_path,
                                                     int64_t max_context_len) {
  Result<std::unique_ptr<LoadedProgram>> loaded =
      LoadedProgram::LoadFile(path, /*methods=*/{}, error, data_path);
  if (!loaded.ok()) {
    return loaded.error();
  }
  std::shared_ptr<LlmProgram> p(new LlmProgram());
  p->path_ = path;
  p->data_path_ = data_path;
  p->program_ = std::move(loaded.get());
  const Error err = p->Init(max_context_len, error);
  if (err != Error::Ok) {
    return err;
  }
  return p;
}

Error LlmProgram::Init(int64_t max_context_len, std::string* error) {
  const auto refuse = [&](const std::string& problem, Error code = Error::InvalidProgram) {
    *error = path_ + ": " + problem;
    return code;
  };
  const std::vector<std::string>& methods = program_->method_names();
  const auto has = [&](const char* name) { return program_->method(name) != nullptr; };
  if (has("forward")) {
    prefill_method_ = decode_method_ = "forward";
  } else if (has("prefill") && has("decode")) {
    prefill_method_ = "prefill";
    decode_method_ = "decode";
  } else {
    std::string names;
    for (const std::string& m : methods) {
      names += (names.empty() ? "'" : ", '") + m + "'";
    }
    return refuse("the program has methods [" + names +
                  "]; an LLM program has forward(tokens, positions), or prefill and decode "
                  "(export it with executorch_trt.llm.export_llm)");
  }
  if (program_->buffers().empty()) {
    return refuse(
        "the program has no named mutable buffers, so a session cannot own its KV cache; export "
        "it with emit_mutable_buffer_names=True (the default of executorch_trt.export and "
        "export_llm)");
  }
  LlmMetadata meta;
  Error err = ReadLlmMetadata(*program_, path_, &meta, error);
  if (err != Error::Ok) {
    return err;
  }
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  bool decode_positions_are_start = false;
  err = CheckSignature(prefill_method_, &prefill_tokens, &positions_are_start_, error);
  if (err == Error::Ok) {
    err = CheckSignature(decode_method_, &decode_tokens, &decode_positions_are_start, error);
  }
  if (err != Error::Ok) {
    return err;
  }
  if (decode_tokens != 1 && decode_method_ != "forward") {
    return refuse("decode takes " + std::to_string(decode_tokens) +
                  " tokens per call; a decode method takes one token ([1, 1])");
  }
  max_seq_len_ = meta.max_seq_len.value_or(prefill_tokens);
  if (max_seq_len_ > prefill_tokens) {
    return refuse("get_max_seq_len says " + std::to_string(max_seq_len_) +
                  " tokens per call, but " + prefill_method_ + " takes at most " +
                  std::to_string(prefill_tokens));
  }
  if (max_seq_len_ < 1) {
    return refuse("get_max_seq_len says " + std::to_string(max_seq_len_) +
                  " tokens per call; at least one is needed");
  }
  // Without enable_dynamic_shape, the prefill method's tokens input says whether it is dynamic.
  prefill_is_dynamic_ =
      meta.enable_dynamic_shape.has_value()
          ? *meta.enable_dynamic_shape
          : prefill_tokens > 1 && InputIsDynamic(*program_->method(prefill_method_), 0);
  if (prefill_method_ == "forward" && prefill_tokens > 1 && !prefill_is_dynamic_) {
    return refuse("forward takes exactly " + std::to_string(prefill_tokens) +
                  " tokens per call and there is no decode method, so no single token can be "
                  "run; export forward with a dynamic length (torch.export.Dim) or add a decode "
                  "method");
  }
  // A max_context_len the metadata contradicts is refused rather than trusted: a wrong value
  // can match another dimension of a buffer (a head size) and make that buffer look positional.
  const int64_t declared = meta.max_context_len.value_or(0);
  if (max_context_len > 0 && declared != 0 && max_context_len != declared) {
    return refuse("max_context_len " + std::to_string(max_context_len) +
                      " contradicts the program's get_max_context_len (" +
                      std::to_string(declared) + "): leave it out or pass " +
                      std::to_string(declared),
                  Error::InvalidArgument);
  }
  // As ExecuTorch's runner: get_max_context_len, else get_max_seq_len (0 counts as absent).
  int64_t capacity = max_context_len;
  if (capacity == 0) {
    capacity = meta.max_context_len.value_or(0);
  }
  if (capacity == 0) {
    capacity = meta.max_seq_len.value_or(0);
  }
  if (capacity == 0) {
    return refuse(
        "the program has no get_max_context_len (nor get_max_seq_len) method saying how many "
        "positions its KV cache has; pass max_context_len",
        Error::InvalidArgument);
  }
  if (capacity < 0) {
    return refuse("max_context_len must be positive, got " + std::to_string(capacity),
                  Error::InvalidArgument);
  }
  if (capacity < 2) {
    return refuse("max_context_len " + std::to_string(capacity) +
                      ": a KV cache of fewer than 2 positions holds no conversation",
                  Error::InvalidArgument);
  }
  Result<executorch::runtime::TensorInfo> out =
      program_->method(decode_method_)->method_meta().output_tensor_meta(0);
  if (!out.ok() || out->sizes().empty()) {
    return refuse(decode_method_ + "'s first output is not logits");
  }
  logits_width_ = out->sizes()[out->sizes().size() - 1];
  vocab_size_ = meta.vocab_size.value_or(0) != 0 ? *meta.vocab_size : logits_width_;
  std::vector<BufferRole> roles;
  if (const Error err = Probe(capacity, &roles, error); err != Error::Ok) {
    return err;
  }
  layout_ = StateLayout::Of(program_->buffers(), capacity, roles);
  if (!layout_.has_positional()) {
    std::string shapes;
    for (const BufferLayout& b : layout_.buffers()) {
      shapes += (shapes.empty() ? "'" : ", '") + b.name + "': " + ShapeString(b.sizes);
    }
    return refuse("no buffer of the program has a dimension of " + std::to_string(capacity) +
                  " positions (max_context_len) along which each token writes its own "
                  "position's entries (once, overwriting), so none is a KV cache; the buffers "
                  "are {" +
                  shapes + "}");
  }
  bos_id_ = meta.bos_id;
  eos_ids_ = meta.eos_ids.value_or(std::vector<int64_t>());
  return Error::Ok;
}

Error LlmProgram::CheckSignature(const std::string& method, int64_t* tokens,
                                 bool* positions_are_start, std::string* error) {
  const MethodMeta meta = program_->method(method)->method_meta();
  bool ok = meta.num_inputs() == 2;
  std::vector<int64_t> sizes[2];
  for (size_t i = 0; ok && i < 2; ++i) {
    Result<executorch::runtime::TensorInfo> info = meta.input_tensor_meta(i);
    ok = info.ok() && info->scalar_type() == ScalarType::Long;
    if (ok) {
      sizes[i].assign(info->sizes().begin(), info->sizes().end());
    }
  }
  ok = ok && sizes[0].size() == 2 && sizes[0][0] == 1 && sizes[1].size() == 1;
  if (!ok) {
    *error = path_ + ": " + method + " takes (" + DeclaredInputs(meta) +
             "); an LLM method takes tokens int64 [1, T] and positions int64 [T] (or [1]: the "
             "first token's)";
    return Error::InvalidProgram;
  }
  *tokens = sizes[0][1];
  const int64_t positions = sizes[1][0];
  if (positions != *tokens && positions != 1) {
    *error = path_ + ": " + method + " takes " + std::to_string(*tokens) + " tokens but " +
             std::to_string(positions) +
             " positions; positions are one per token, or the first token's";
    return Error::InvalidProgram;
  }
  *positions_are_start = positions == 1 && *tokens > 1;
  return Error::Ok;
}

Error LlmProgram::Probe(int64_t capacity, std::vector<BufferRole>* roles, std::string* error) {
  const std::vector<NamedBuffer>& buffers = program_->buffers();
  roles->assign(buffers.size(), BufferRole{});
  std::vector<bool> undecided(buffers.size(), false);
  for (size_t i = 0; i < buffers.size(); ++i) {
    undecided[i] = std::find(buffers[i].sizes.begin(), buffers[i].sizes.end(), capacity) !=
                   buffers[i].sizes.end();
  }
  const std::vector<std::array<int64_t, 3>> sets = StateProbe::TokenSets(vocab_size_);
  for (size_t set = 0; set < sets.size(); ++set) {
    StateProbe probe(buffers, capacity);
    if (const Error err = RunProbe(sets[set], &probe, error); err != Error::Ok) {
      return err;
    }
    const std::vector<BufferRole> found = probe.Roles();
    bool left = false;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (set == 0) {
        (*roles)[i].counter = found[i].counter;  // counters from the first set
      }
      if (undecided[i] && !probe.Silent(i)) {
        (*roles)[i].positional_dim = found[i].positional_dim;
        undecided[i] = false;
      }
      left = left || undecided[i];
    }
    if (!left) {
      break;
    }
  }
  return Error::Ok;
}

Error LlmProgram::RunProbe(const std::array<int64_t, 3>& ids, StateProbe* probe,
                           std::string* error) {
  // A member: the program keeps the state it last ran bound until a session binds its own.
  probe_state_ = NewState();
  std::vector<BufferBinding> bindings;
  for (size_t i = 0; i < program_->buffers().size(); ++i) {
    const NamedBuffer& b = program_->buffers()[i];
    bindings.push_back({b.name, probe_state_[i].data(), b.nbytes});
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    probe->Prepare(bindings);
    std::vector<float> logits;
    std::string why;
    if (Run(bindings, &ids[k], 1, StateProbe::kPositions[k], &logits, &why) != Error::Ok) {
      *error = path_ + ": " + decode_method_ + " failed on token " + std::to_string(ids[k]) +
               " at position " + std::to_string(StateProbe::kPositions[k]) +
               ", run on a fresh state to find the KV caches: " + why;
      return Error::InvalidProgram;
    }
    probe->Observe(bindings);
  }
  return Error::Ok;
}

std::vector<OwnedBuffer> LlmProgram::NewState() const {
  std::vector<OwnedBuffer> state;
  state.reserve(program_->buffers().size());
  for (size_t i = 0; i < program_->buffers().size(); ++i) {
    state.emplace_back(program_->buffers()[i].nbytes);
    InitialValue(i, state.back().data());
  }
  return state;
}

const std::vector<uint8_t>& LlmProgram::InitialBytes(size_t index) const {
  return program_->initial_value(program_->buffers()[index].name);
}

void LlmProgram::InitialValue(size_t index, uint8_t* to) const {
  const NamedBuffer& b = program_->buffers()[index];
  const std::vector<uint8_t>& initial = program_->initial_value(b.name);
  if (initial.empty()) {
    std::memset(to, 0, b.nbytes);
  } else {
    std::memcpy(to, initial.data(), b.nbytes);
  }
}

std::unique_ptr<Session> LlmProgram::NewSession() {
  SessionContents contents;
  contents.state = NewState();
  return std::unique_ptr<Session>(new Session(shared_from_this(), std::move(contents)));
}

Result<std::unique_ptr<Session>> LlmProgram::LoadSession(const std::string& path,
                                                         std::string* error) {
  Result<ProgramFingerprint> fp = fingerprint(error);
  if (!fp.ok()) {
    return fp.error();
  }
  SessionContents contents;
  contents.state = NewState();
  const Error err = ReadSessionFile(path, layout_, fp.get(), &contents, error);
  if (err != Error::Ok) {
    return err;
  }
  // What the file cannot know about this program: the vocabulary and the logits' width. A
  // held id outside the vocabulary would be run again by a rewind.
  for (size_t i = 0; i < contents.tokens.size(); ++i) {
    if (contents.tokens[i] < 0 || contents.tokens[i] >= vocab_size_) {
      *error = path + ": token " + std::to_string(i) + " is " + std::to_string(contents.tokens[i]) +
               ", outside the vocabulary [0, " + std::to_string(vocab_size_) + ")";
      return Error::InvalidArgument;
    }
  }
  if (contents.logits && static_cast<int64_t>(contents.logits->size()) != logits_width_) {
    *error = path + ": its logits have " + std::to_string(contents.logits->size()) +
             " values, this program's " + std::to_string(logits_width_);
    return Error::InvalidArgument;
  }
  return Session::Restored(shared_from_this(), std::move(contents));
}

Result<ProgramFingerprint> LlmProgram::fingerprint(std::string* error) {
  std::lock_guard<std::mutex> lock(fingerprint_mu_);
  if (!fingerprint_) {
    ProgramFingerprint fp;
    if (!Blake2b256OfFile(path_, &fp.program_blake2b, error)) {
      return Error::AccessFailed;
    }
    if (!data_path_.empty()) {
      std::string hex;
      if (!Blake2b256OfFile(data_path_, &hex, error)) {
        return Error::AccessFailed;
      }
      fp.data_blake2b = hex;
    }
    fingerprint_ = std::move(fp);
  }
  return *fingerprint_;
}

Error LlmProgram::Run(const std::vector<BufferBinding>& state, const int64_t* ids, size_t n,
                      int64_t start, std::vector<float>* logits, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Error err = program_->BindBuffers(state, error);
  if (err != Error::Ok) {
    return err;
  }
  const std::string& name = n == 1 ? decode_method_ : prefill_method_;
  executorch::runtime::Method& method = *program_->method(name);
  std::vector<int64_t> positions;
  if (positions_are_start_) {
    positions.push_back(start);
  } else {
    for (size_t i = 0; i < n; ++i) {
      positions.push_back(start + static_cast<int64_t>(i));
    }
  }
  const auto count = static_cast<executorch::aten::SizesType>(n);
  // Inputs over this call's memory: set_input copies them into the method's planned inputs.
  auto tokens =
      executorch::extension::from_blob(const_cast<int64_t*>(ids), {1, count}, ScalarType::Long);
  auto where = executorch::extension::from_blob(
      positions.data(), {static_cast<executorch::aten::SizesType>(positions.size())},
      ScalarType::Long);
  err = method.set_input(EValue(*tokens), 0);
  if (err == Error::Ok) {
    err = method.set_input(EValue(*where), 1);
  }
  if (err != Error::Ok) {
    *error = "method '" + name + "' rejected " + std::to_string(n) + " tokens at position " +
             std::to_string(start) + " (set_input error " + ErrorText(err) + ")";
    return Error::Internal;
  }
  err = method.execute();
  if (err != Error::Ok) {
    *error = "method '" + name + "' failed on " + std::to_string(n) + " tokens at position " +
             std::to_string(start) + " (error " + ErrorText(err) + "; see the log)";
    return Error::Internal;
  }
  if (method.outputs_size() == 0 || !method.get_output(0).isTensor() ||
      method.get_output(0).toTensor().dim() == 0 ||
      !LastLogits(method.get_output(0).toTensor(), logits)) {
    *error = "method '" + name + "': its first output is not a floating-point logits tensor";
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

}  // namespace executorch_trt::extension::llm
