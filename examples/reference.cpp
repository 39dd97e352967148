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

constexpr const char* kFormat = "executorch_trt.kv_cache_decode_reference/1";

bool Fail(std::string* error, const std::string& path, const std::string& what) {
  *error = path + ": " + what;
  return false;
}

bool ReadInts(const json& j, std::vector<int64_t>* out) {
  if (!j.is_array()) return false;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return false;
    out->push_back(v.get<int64_t>());
  }
  return true;
}

}  // namespace

bool LoadReference(const std::string& path, Reference* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(error, path, "cannot open the reference file (does it exist?)");
  std::stringstream buf;
  buf << in.rdbuf();
  const json j = json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(error, path,
                "not valid JSON or not a JSON object (NaN/Infinity are not JSON); is this "
                "the reference written by export_kv_cache_decode.py?");
  }
  if (!j.contains("format") || j["format"] != kFormat) {
    return Fail(error, path, std::string("\"format\" must be \"") + kFormat + "\"");
  }
  if (!j.contains("kv_cache") || !j["kv_cache"].is_string() ||
      (j["kv_cache"] != "inplace" && j["kv_cache"] != "copy_back")) {
    return Fail(error, path, "\"kv_cache\" must be \"inplace\" or \"copy_back\"");
  }
  out->kv_cache = j["kv_cache"].get<std::string>();
  if (!j.contains("prompt") || !ReadInts(j["prompt"], &out->prompt) || out->prompt.empty()) {
    return Fail(error, path, "\"prompt\" must be a non-empty array of token ids");
  }
  if (!j.contains("caches") || !j["caches"].is_array() || j["caches"].empty()) {
    return Fail(error, path, "\"caches\" must be a non-empty array");
  }
  for (const auto& c : j["caches"]) {
    CacheSpec spec;
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("shape") ||
        !ReadInts(c["shape"], &spec.shape) || spec.shape.empty() ||
        c.value("dtype", "") != "float32") {
      return Fail(error, path, "each cache needs \"name\", \"shape\" and dtype \"float32\"");
    }
    int64_t numel = 1;
    for (int64_t d : spec.shape) {
      if (d <= 0 || d > (int64_t{1} << 31))
        return Fail(error, path, "cache shape has a bad dimension");
      numel *= d;
      if (numel > (int64_t{1} << 34))
        return Fail(error, path, "cache " + c["name"].get<std::string>() + " is implausibly large");
    }
    spec.name = c["name"].get<std::string>();
    out->caches.push_back(std::move(spec));
  }
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty()) {
    return Fail(error, path, "\"steps\" must be a non-empty array");
  }
  for (const auto& s : j["steps"]) {
    ReferenceStep step;
    if (!s.is_object() || !s.contains("step") || !s["step"].is_number_integer() ||
        !s.contains("token") || !s["token"].is_number_integer() || !s.contains("logits") ||
        !s["logits"].is_array() || !s.contains("cache_checksums") ||
        !s["cache_checksums"].is_object()) {
      return Fail(error, path,
                  "each step needs \"step\", \"token\", \"logits\", \"cache_checksums\"");
    }
    step.step = s["step"].get<int>();
    step.token = s["token"].get<int64_t>();
    for (const auto& v : s["logits"]) {
      if (!v.is_number()) return Fail(error, path, "logits must be numbers");
      const double x = v.get<double>();
      if (!std::isfinite(static_cast<float>(x))) {
        return Fail(error, path,
                    "step " + std::to_string(out->steps.size()) +
                        " has a logit that is not a finite float32");
      }
      step.logits.push_back(static_cast<float>(x));
    }
    if (step.step != static_cast<int>(out->steps.size())) {
      return Fail(error, path, "steps must be numbered 0, 1, 2, ...");
    }
    if (out->vocab_size == 0) out->vocab_size = static_cast<int64_t>(step.logits.size());
    if (step.logits.empty() || static_cast<int64_t>(step.logits.size()) != out->vocab_size) {
      return Fail(error, path, "every step must have the same, non-zero number of logits");
    }
    if (step.token < 0 || step.token >= out->vocab_size) {
      return Fail(error, path,
                  "step " + std::to_string(step.step) + " token is out of the vocabulary");
    }
    for (const auto& spec : out->caches) {
      const auto it = s["cache_checksums"].find(spec.name);
      if (it == s["cache_checksums"].end() || !it->is_array() || it->size() != 4) {
        return Fail(error, path,
                    "step " + std::to_string(step.step) + " has no 4-value checksum for cache " +
                        spec.name);
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
    out->steps.push_back(std::move(step));
  }
  for (int64_t tok : out->prompt) {
    if (tok < 0 || tok >= out->vocab_size) {
      return Fail(error, path,
                  "prompt token " + std::to_string(tok) + " is outside the vocabulary [0, " +
                      std::to_string(out->vocab_size) + ")");
    }
  }
  return true;
}

}  // namespace executorch_trt::examples
