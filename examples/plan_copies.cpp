// plan_copies.cpp: see plan_copies.h. The program flatbuffer is read with the C++ code flatc
// generates from ExecuTorch's own schema (//examples:program_schema), after
// flatbuffers::Verifier has checked every offset, length and alignment in it.
#include "examples/plan_copies.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

// libexecutorch.so exports the inline functions of its own FlatBuffers release and of its own
// code generated from this schema (flatbuffers::Verifier::*, executorch_flatbuffer::*::Verify)
// under the same names as ours. Exported from a binary, our 2.0.8 copies would replace
// ExecuTorch's at load time and break its verifier (every Program::load with
// InternalConsistency fails); hidden, each side binds to its own.
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"
#pragma GCC visibility pop

namespace executorch_trt::examples {
namespace {

namespace fb = executorch_flatbuffer;
using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::Result;

// ExecuTorch's extended header (schema/extended_header.h, not shipped in the wheel's SDK): at
// byte 8, magic "eh00", uint32 header length (>= 24), uint64 program size, uint64 segment base
// offset.
constexpr size_t kExtendedHeaderOffset = 8;
constexpr size_t kExtendedHeaderMinLength = 24;
constexpr size_t kHeadBytes = 64;

// flatbuffers::Verifier asserts that a buffer is smaller than this (32-bit signed offsets).
constexpr uint64_t kMaxFlatbufferSize = FLATBUFFERS_MAX_BUFFER_SIZE;

constexpr const char* kCopyOp = "aten::copy_";
constexpr const char* kCopyIndexOp = "executorch_prim::et_copy_index";

using Values = flatbuffers::Vector<flatbuffers::Offset<fb::EValue>>;

// Bytes per element of `type` (ExecuTorch's own list of scalar types), or 0 if `type` is not
// one (elementSize() would abort on it).
size_t ElementSize(fb::ScalarType type) {
  switch (static_cast<ScalarType>(type)) {
#define EXECUTORCH_TRT_ELEMENT_SIZE(ctype, name) \
  case ScalarType::name:                         \
    return sizeof(ctype);
    ET_FORALL_SCALAR_TYPES(EXECUTORCH_TRT_ELEMENT_SIZE)
#undef EXECUTORCH_TRT_ELEMENT_SIZE
    default:
      return 0;
  }
}

uint64_t LoadLE(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

// Optional fields: an absent string is "", an absent vector has no elements.
std::string Str(const flatbuffers::String* s) { return s == nullptr ? std::string() : s->str(); }
template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// "Int (tag 2)", or "tag 42" for a tag this schema does not know.
std::string KernelTypeLabel(fb::KernelTypes type) {
  const int tag = static_cast<int>(type);
  const bool known = type >= fb::KernelTypes::MIN && type <= fb::KernelTypes::MAX;
  return known ? std::string(fb::EnumNameKernelTypes(type)) + " (tag " + std::to_string(tag) + ")"
               : "tag " + std::to_string(tag);
}

// Static sizes, element size and name of one tensor value in a plan.
struct TensorFacts {
  uint64_t nbytes = 0;
  bool static_shape = true;
  std::string name;
};

// Reads value `index` of `values`, which must be a tensor. On failure returns false and sets
// *problem.
bool ReadTensor(const Values* values, int32_t index, TensorFacts* out, std::string* problem) {
  if (index < 0 || static_cast<uint32_t>(index) >= Size(values)) {
    *problem = "value index " + std::to_string(index) + " outside the plan's " +
               std::to_string(Size(values)) + " values";
    return false;
  }
  const fb::EValue* value = values->Get(static_cast<uint32_t>(index));
  const fb::Tensor* tensor = value->val_as_Tensor();
  if (tensor == nullptr) {
    *problem = "value #" + std::to_string(index) + " is not a tensor (EValue of type " +
               KernelTypeLabel(value->val_type()) + ")";
    return false;
  }
  uint64_t nbytes = ElementSize(tensor->scalar_type());
  if (nbytes == 0) {
    *problem = "value #" + std::to_string(index) + " has unknown scalar type " +
               std::to_string(static_cast<int>(tensor->scalar_type()));
    return false;
  }
  const auto* sizes = tensor->sizes();
  for (uint32_t d = 0; d < Size(sizes); ++d) {
    const int32_t size = sizes->Get(d);
    if (size < 0 || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(size), &nbytes)) {
      *problem = "value #" + std::to_string(index) + " has an invalid size " +
                 std::to_string(size) + " in dim " + std::to_string(d);
      return false;
    }
  }
  out->nbytes = nbytes;
  out->static_shape = tensor->shape_dynamism() == fb::TensorShapeDynamism::STATIC;
  out->name = tensor->extra_tensor_info() == nullptr
                  ? std::string()
                  : Str(tensor->extra_tensor_info()->fully_qualified_name());
  return true;
}

// The copies one method's plan makes. On failure returns false and sets *problem and *where.
bool ReadMethod(const fb::ExecutionPlan& plan, MethodCopies* method, std::string* problem,
                std::string* where) {
  method->method = Str(plan.name());
  const Values* values = plan.values();
  const auto* operators = plan.operators();
  const auto* chains = plan.chains();
  for (uint32_t c = 0; c < Size(chains); ++c) {
    const auto* instructions = chains->Get(c)->instructions();
    for (uint32_t i = 0; i < Size(instructions); ++i) {
      *where = "method '" + method->method + "', chain " + std::to_string(c) + ", instruction " +
               std::to_string(i);
      const fb::Instruction* instruction = instructions->Get(i);
      if (instruction->instr_args_type() == fb::InstructionArguments::JumpFalseCall)
        method->exact = false;
      if (instruction->instr_args_type() != fb::InstructionArguments::KernelCall) continue;
      const fb::KernelCall* call = instruction->instr_args_as_KernelCall();
      if (call == nullptr) {
        *problem = "KernelCall without arguments";
        return false;
      }
      const int32_t op_index = call->op_index();
      if (op_index < 0 || static_cast<uint32_t>(op_index) >= Size(operators)) {
        *problem = "operator index " + std::to_string(op_index) + " outside the plan's " +
                   std::to_string(Size(operators)) + " operators";
        return false;
      }
      const std::string op = Str(operators->Get(static_cast<uint32_t>(op_index))->name());
      const bool is_copy = op == kCopyOp;
      if (!is_copy && op != kCopyIndexOp) continue;
      // copy_: destination = last argument (the returned self), copies the destination's size.
      // et_copy_index(copy_to, copy_from, index): copies copy_from into copy_to.
      const auto* args = call->args();
      const uint32_t needed = is_copy ? 1 : 2;
      if (Size(args) < needed) {
        *problem = op + " with " + std::to_string(Size(args)) + " arguments";
        return false;
      }
      PlanCopy copy;
      copy.op = op;
      copy.chain = c;
      copy.instruction = i;
      copy.destination_value = args->Get(is_copy ? args->size() - 1 : 0);
      TensorFacts destination;
      if (!ReadTensor(values, copy.destination_value, &destination, problem)) return false;
      copy.destination_name = destination.name;
      copy.bytes = destination.nbytes;
      bool static_shape = destination.static_shape;
      if (!is_copy) {
        TensorFacts source;
        if (!ReadTensor(values, args->Get(1), &source, problem)) return false;
        copy.bytes = source.nbytes;
        static_shape = static_shape && source.static_shape;
      }
      if (!static_shape) method->exact = false;
      method->copies.push_back(std::move(copy));
    }
  }
  return true;
}

std::string Printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f) {
      s += static_cast<char>(p[i]);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", p[i]);
      s += hex;
    }
  }
  return s;
}

}  // namespace

std::string PlanCopy::DestinationLabel() const {
  if (!destination_name.empty()) return "'" + destination_name + "'";
  return "value #" + std::to_string(destination_value) + " (unnamed)";
}

uint64_t MethodCopies::BytesPerCall() const {
  uint64_t total = 0;
  for (const auto& c : copies) total += c.bytes;
  return total;
}

const MethodCopies* ProgramCopies::Find(const std::string& method) const {
  for (const auto& m : methods) {
    if (m.method == method) return &m;
  }
  return nullptr;
}

std::string ProgramCopies::MethodNames() const {
  std::string names;
  for (const auto& m : methods) names += (names.empty() ? "" : ", ") + m.method;
  return names;
}

Result<ProgramCopies> ParseProgramCopies(const uint8_t* data, size_t size,
                                         const std::string& source, std::string* error) {
  const std::string prefix = source + ": cannot read the execution plan: ";
  if (size < 8) {
    *error =
        prefix + "only " + std::to_string(size) + " bytes, too short for an ExecuTorch program";
    return Error::InvalidProgram;
  }
  if (!flatbuffers::BufferHasIdentifier(data, fb::ProgramIdentifier())) {
    *error = prefix + "file identifier '" + Printable(data + 4, 4) + "', expected '" +
             fb::ProgramIdentifier() +
             "' (not an ExecuTorch program, or one of another schema version)";
    return Error::InvalidProgram;
  }
  // A flatbuffer cannot reach past this (and the verifier asserts a smaller buffer): what
  // follows it, e.g. segments, is never part of the program.
  size = static_cast<size_t>(std::min<uint64_t>(size, kMaxFlatbufferSize - 1));
  // The verifier and the generated accessors load scalars in place: give them a buffer at
  // least as aligned as the builder's (a caller's unaligned buffer is copied).
  std::unique_ptr<std::max_align_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) != 0) {
    aligned.reset(
        new std::max_align_t[(size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
    std::memcpy(aligned.get(), data, size);
    data = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  flatbuffers::Verifier verifier(data, size);
  if (!fb::VerifyProgramBuffer(verifier)) {
    *error = prefix + "the program flatbuffer (" + std::to_string(size) +
             " bytes) fails verification against ExecuTorch's schema: an offset, length or "
             "alignment out of "
             "range, or more nesting or tables than flatbuffers' verifier allows (the file is "
             "corrupt or "
             "truncated: re-export it)";
    return Error::InvalidProgram;
  }
  const fb::Program* root = fb::GetProgram(data);
  const auto* plans = root->execution_plan();
  if (Size(plans) == 0) {
    *error = prefix + "the program has no methods (the file is corrupt: re-export it)";
    return Error::InvalidProgram;
  }
  ProgramCopies program;
  for (uint32_t p = 0; p < plans->size(); ++p) {
    MethodCopies method;
    std::string problem;
    std::string where = "execution plan " + std::to_string(p);
    if (!ReadMethod(*plans->Get(p), &method, &problem, &where)) {
      *error = prefix + problem + " (in " + where + "; the file is corrupt: re-export it)";
      return Error::InvalidProgram;
    }
    program.methods.push_back(std::move(method));
  }
  return program;
}

Result<ProgramCopies> ReadProgramCopies(const std::string& path, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = path + ": cannot open";
    return Error::AccessFailed;
  }
  // The file's size, then its head (enough for the extended header).
  const long end = std::fseek(f, 0, SEEK_END) == 0 ? std::ftell(f) : -1;
  if (end < 0 || std::fseek(f, 0, SEEK_SET) != 0) {
    std::fclose(f);
    *error = path + ": cannot read (not a regular file?)";
    return Error::AccessFailed;
  }
  const uint64_t file_size = static_cast<uint64_t>(end);
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(file_size, kHeadBytes)));
  if (std::fread(head.data(), 1, head.size(), f) != head.size()) {
    std::fclose(f);
    *error = path + ": cannot read";
    return Error::AccessFailed;
  }
  // With an extended header, the program flatbuffer is its first `program_size` bytes (the
  // segments, e.g. weights, follow and are not needed); without one, the whole file.
  uint64_t program_size = file_size;
  if (head.size() >= kExtendedHeaderOffset + kExtendedHeaderMinLength &&
      std::memcmp(head.data() + kExtendedHeaderOffset, "eh00", 4) == 0) {
    const uint8_t* header = head.data() + kExtendedHeaderOffset;
    const uint64_t header_length = LoadLE(header + 4, 4);
    program_size = LoadLE(header + 8, 8);
    if (header_length < kExtendedHeaderMinLength || program_size < 8 || program_size > file_size) {
      std::fclose(f);
      *error = path + ": cannot read the execution plan: corrupt extended header (length " +
               std::to_string(header_length) + ", program size " + std::to_string(program_size) +
               ", file " + std::to_string(file_size) + " bytes)";
      return Error::InvalidProgram;
    }
  }
  if (program_size >= kMaxFlatbufferSize) {
    std::fclose(f);
    *error = path + ": cannot read the execution plan: program of " + std::to_string(program_size) +
             " bytes, more than a flatbuffer can hold";
    return Error::InvalidProgram;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(program_size));
  const bool read = bytes.empty() || (std::fseek(f, 0, SEEK_SET) == 0 &&
                                      std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
  if (!read) {
    *error = path + ": cannot read " + std::to_string(program_size) + " bytes";
    return Error::AccessFailed;
  }
  return ParseProgramCopies(bytes.data(), bytes.size(), path, error);
}

}  // namespace executorch_trt::examples
