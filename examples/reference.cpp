#include "examples/reference.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace executorch_trt::examples {

using nlohmann::json;

int64_t CacheSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t Reference::num_cross_caches() const {
  size_t n = 0;
  for (const auto& c : caches) n += c.cross ? 1 : 0;
  return n;
}

Checksum CacheChecksum(const float* data, int64_t numel) {
  double sum = 0.0, weighted = 0.0, abs_sum = 0.0, abs_weighted = 0.0;
  for (int64_t i = 0; i < numel; ++i) {
    const double x = data[i];
    const double w = 1.0 + static_cast<double>(i % 1021);
    sum += x;
    weighted += x * w;
    abs_sum += std::fabs(x);
    abs_weighted += std::fabs(x) * w;
  }
  return {sum, weighted, abs_sum, abs_weighted};
}

namespace {

constexpr const char* kDecoderFormat = "executorch_trt.kv_cache_decode_reference/1";
constexpr const char* kEncoderDecoderFormat = "executorch_trt.cross_attn_decode_reference/1";
constexpr int64_t kMaxNumel = int64_t{1} << 34;

bool Fail(std::string* error, const std::string& path, const std::string& what) {
  *error = path + ": " + what;
  return false;
}

// obj[key] when it is a string, else "" (json::value(key, "") throws type_error when the
// field is there with another type: reference_json_fuzzer found {"dtype": 0} aborting the
// runner).
std::string StringField(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool ReadInts(const json& j, std::vector<int64_t>* out) {
  if (!j.is_array()) return false;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return false;
    out->push_back(v.get<int64_t>());
  }
  return true;
}

// A shape of positive dimensions with at most kMaxNumel elements; *numel = their product.
bool ValidShape(const std::vector<int64_t>& shape, int64_t* numel) {
  *numel = 1;
  for (int64_t d : shape) {
    if (d <= 0 || d > (int64_t{1} << 31)) return false;
    *numel *= d;
    if (*numel > kMaxNumel) return false;
  }
  return !shape.empty();
}

// A finite float32 from a JSON number; false for anything else (1e39 is not a float32).
bool ReadFloat(const json& v, float* out) {
  if (!v.is_number()) return false;
  const double x = v.get<double>();
  if (!std::isfinite(static_cast<float>(x))) return false;
  *out = static_cast<float>(x);
  return true;
}

// `{shape, data}`: data holds product(shape) finite float32 values.
bool ParseFloatTensor(const json& j, const std::string& path, const std::string& what,
                      FloatTensor* out, std::string* error) {
  int64_t numel = 0;
  if (!j.is_object() || !j.contains("shape") || !ReadInts(j["shape"], &out->shape) ||
      !ValidShape(out->shape, &numel) || !j.contains("data") || !j["data"].is_array()) {
    return Fail(error, path, what + " needs \"shape\" (positive dimensions) and \"data\"");
  }
  if (static_cast<int64_t>(j["data"].size()) != numel) {
    return Fail(error, path,
                what + " has " + std::to_string(j["data"].size()) + " values for shape of " +
                    std::to_string(numel) + " elements");
  }
  out->data.reserve(static_cast<size_t>(numel));
  for (const auto& v : j["data"]) {
    float x = 0;
    if (!ReadFloat(v, &x)) {
      return Fail(error, path, what + " has a value that is not a finite float32");
    }
    out->data.push_back(x);
  }
  return true;
}

bool ParseCaches(const json& j, const std::string& path, bool encoder_decoder, Reference* out,
                 std::string* error) {
  if (!j.contains("caches") || !j["caches"].is_array() || j["caches"].empty()) {
    return Fail(error, path, "\"caches\" must be a non-empty array");
  }
  for (const auto& c : j["caches"]) {
    CacheSpec spec;
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("shape") ||
        !ReadInts(c["shape"], &spec.shape) || spec.shape.empty() ||
        StringField(c, "dtype") != "float32") {
      return Fail(error, path, "each cache needs \"name\", \"shape\" and dtype \"float32\"");
    }
    spec.name = c["name"].get<std::string>();
    int64_t numel = 0;
    if (!ValidShape(spec.shape, &numel)) {
      return Fail(error, path,
                  "cache " + spec.name + " has a bad dimension or is implausibly large");
    }
    if (encoder_decoder) {
      const std::string kind = StringField(c, "kind");
      if (kind != "self" && kind != "cross") {
        return Fail(error, path, "cache " + spec.name + " needs \"kind\" \"self\" or \"cross\"");
      }
      spec.cross = kind == "cross";
    }
    out->caches.push_back(std::move(spec));
  }
  return true;
}

// `steps` of one utterance (`label` names it in messages); sets out->vocab_size from the
// first step read.
bool ParseSteps(const json& steps, const std::string& path, const std::string& label,
                Reference* out, std::vector<ReferenceStep>* parsed, std::string* error) {
  if (!steps.is_array() || steps.empty()) {
    return Fail(error, path, label + "\"steps\" must be a non-empty array");
  }
  for (const auto& s : steps) {
    ReferenceStep step;
    if (!s.is_object() || !s.contains("step") || !s["step"].is_number_integer() ||
        !s.contains("token") || !s["token"].is_number_integer() || !s.contains("logits") ||
        !s["logits"].is_array() || !s.contains("cache_checksums") ||
        !s["cache_checksums"].is_object()) {
      return Fail(error, path,
                  label + "each step needs \"step\", \"token\", \"logits\", \"cache_checksums\"");
    }
    step.step = s["step"].get<int>();
    step.token = s["token"].get<int64_t>();
    for (const auto& v : s["logits"]) {
      float x = 0;
      if (!v.is_number()) return Fail(error, path, "logits must be numbers");
      if (!ReadFloat(v, &x)) {
        return Fail(error, path,
                    label + "step " + std::to_string(parsed->size()) +
                        " has a logit that is not a finite float32");
      }
      step.logits.push_back(x);
    }
    if (step.step != static_cast<int>(parsed->size())) {
      return Fail(error, path, label + "steps must be numbered 0, 1, 2, ...");
    }
    if (out->vocab_size == 0) out->vocab_size = static_cast<int64_t>(step.logits.size());
    if (step.logits.empty() || static_cast<int64_t>(step.logits.size()) != out->vocab_size) {
      return Fail(error, path, "every step must have the same, non-zero number of logits");
    }
    if (step.token < 0 || step.token >= out->vocab_size) {
      return Fail(error, path,
                  label + "step " + std::to_string(step.step) + " token is out of the vocabulary");
    }
    for (const auto& spec : out->caches) {
      const auto it = s["cache_checksums"].find(spec.name);
      if (it == s["cache_checksums"].end() || !it->is_array() || it->size() != 4) {
        return Fail(error, path,
                    label + "step " + std::to_string(step.step) +
                        " has no 4-value checksum for cache " + spec.name);
      }
      Checksum checksum;
      for (const auto& v : *it) {
        if (!v.is_number() || !std::isfinite(v.get<double>())) {
          return Fail(error, path, "checksums must be finite numbers");
        }
        checksum.push_back(v.get<double>());
      }
      step.cache_checksums[spec.name] = std::move(checksum);
    }
    parsed->push_back(std::move(step));
  }
  return true;
}

bool ParseUtterances(const json& j, const std::string& path, Reference* out, std::string* error) {
  if (!j.contains("utterances") || !j["utterances"].is_array() || j["utterances"].empty()) {
    return Fail(error, path, "\"utterances\" must be a non-empty array");
  }
  for (const auto& u : j["utterances"]) {
    const std::string label = "utterance " + std::to_string(out->utterances.size()) + ": ";
    Utterance utterance;
    if (!u.is_object() || !u.contains("input_features") || !u.contains("encoder_hidden_states") ||
        !u.contains("steps")) {
      return Fail(error, path,
                  label + "needs \"input_features\", \"encoder_hidden_states\" and \"steps\"");
    }
    if (!ParseFloatTensor(u["input_features"], path, label + "\"input_features\"",
                          &utterance.input_features, error) ||
        !ParseFloatTensor(u["encoder_hidden_states"], path, label + "\"encoder_hidden_states\"",
                          &utterance.encoder_hidden_states, error) ||
        !ParseSteps(u["steps"], path, label, out, &utterance.steps, error)) {
      return false;
    }
    if (!out->utterances.empty() &&
        (utterance.steps.size() != out->utterances[0].steps.size() ||
         utterance.input_features.shape != out->utterances[0].input_features.shape ||
         utterance.encoder_hidden_states.shape != out->utterances[0].encoder_hidden_states.shape)) {
      return Fail(error, path,
                  label +
                      "every utterance must have the same number of steps and the same "
                      "feature and encoder-output shapes");
    }
    out->utterances.push_back(std::move(utterance));
  }
  return true;
}

// The vocabulary holds every token of `prompt`; `what` names the prompt in the message.
bool CheckPromptTokens(const std::vector<int64_t>& prompt, const std::string& what,
                       const std::string& path, const Reference& ref, std::string* error) {
  for (int64_t tok : prompt) {
    if (tok < 0 || tok >= ref.vocab_size) {
      return Fail(error, path,
                  what + " token " + std::to_string(tok) + " is outside the vocabulary [0, " +
                      std::to_string(ref.vocab_size) + ")");
    }
  }
  return true;
}

// The optional "prompts" of a decoder-only reference (reference.h).
bool ParsePrompts(const json& j, const std::string& path, Reference* out, std::string* error) {
  if (!j.contains("prompts")) return true;
  if (!j["prompts"].is_array()) return Fail(error, path, "\"prompts\" must be an array");
  for (const auto& entry : j["prompts"]) {
    const std::string label = "prompts[" + std::to_string(out->prompts.size()) + "]: ";
    PromptRun run;
    if (!entry.is_object() || !entry.contains("prompt") || !entry.contains("steps") ||
        !ReadInts(entry["prompt"], &run.prompt) || run.prompt.empty()) {
      return Fail(error, path, label + "needs a non-empty \"prompt\" of token ids and \"steps\"");
    }
    if (!ParseSteps(entry["steps"], path, label, out, &run.steps, error) ||
        !CheckPromptTokens(run.prompt, label + "prompt", path, *out, error)) {
      return false;
    }
    out->prompts.push_back(std::move(run));
  }
  return true;
}

}  // namespace

bool LoadReference(const std::string& path, Reference* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(error, path, "cannot open the reference file (does it exist?)");
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseReference(buf.str(), path, out, error);
}

bool ParseReference(std::string_view text, const std::string& path, Reference* out,
                    std::string* error) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(error, path,
                "not valid JSON or not a JSON object (NaN/Infinity are not JSON); is this "
                "the reference written by export_kv_cache_decode.py or "
                "export_cross_attn_decode.py?");
  }
  if (!j.contains("format") ||
      (j["format"] != kDecoderFormat && j["format"] != kEncoderDecoderFormat)) {
    return Fail(error, path,
                std::string("\"format\" must be \"") + kDecoderFormat + "\" or \"" +
                    kEncoderDecoderFormat + "\"");
  }
  out->encoder_decoder = j["format"] == kEncoderDecoderFormat;
  if (!j.contains("kv_cache") || !j["kv_cache"].is_string() ||
      (j["kv_cache"] != "inplace" && j["kv_cache"] != "copy_back")) {
    return Fail(error, path, "\"kv_cache\" must be \"inplace\" or \"copy_back\"");
  }
  out->kv_cache = j["kv_cache"].get<std::string>();
  if (!j.contains("prompt") || !ReadInts(j["prompt"], &out->prompt) || out->prompt.empty()) {
    return Fail(error, path, "\"prompt\" must be a non-empty array of token ids");
  }
  if (!ParseCaches(j, path, out->encoder_decoder, out, error)) {
    return false;
  }
  if (out->encoder_decoder) {
    if (!ParseUtterances(j, path, out, error)) {
      return false;
    }
  } else {
    if (!j.contains("steps")) {
      return Fail(error, path, "\"steps\" must be a non-empty array");
    }
    out->utterances.emplace_back();
    if (!ParseSteps(j["steps"], path, "", out, &out->utterances[0].steps, error) ||
        !ParsePrompts(j, path, out, error)) {
      return false;
    }
  }
  return CheckPromptTokens(out->prompt, "prompt", path, *out, error);
}

}  // namespace executorch_trt::examples
