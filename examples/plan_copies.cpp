// plan_copies.cpp: see plan_copies.h. The program flatbuffer is read with the C++ code flatc
// generates from ExecuTorch's own schema (pte_file.h), after flatbuffers::Verifier has checked
// every offset, length and alignment in it.
#include "examples/plan_copies.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "examples/pte_file.h"

namespace executorch_trt::examples {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::Result;

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
  std::unique_ptr<AlignedBytes> aligned;
  if (reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) != 0) {
    aligned = std::make_unique<AlignedBytes>(data, size);
    data = aligned->data();
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
  const std::string prefix = path + ": cannot read the execution plan: ";
  Result<PteFile> file = PteFile::Open(path, prefix, error);
  if (!file.ok()) {
    return file.error();
  }
  const uint64_t program_size = file->program_size();
  if (program_size >= kMaxFlatbufferSize) {
    *error = prefix + "program of " + std::to_string(program_size) +
             " bytes, more than a flatbuffer can hold";
    return Error::InvalidProgram;
  }
  // The segments (e.g. weights) that follow the program are not needed.
  std::vector<uint8_t> bytes(static_cast<size_t>(program_size));
  if (!file->ReadAt(0, bytes.data(), bytes.size())) {
    *error = path + ": cannot read " + std::to_string(program_size) + " bytes";
    return Error::AccessFailed;
  }
  return ParseProgramCopies(bytes.data(), bytes.size(), path, error);
}

}  // namespace executorch_trt::examples
