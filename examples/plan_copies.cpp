// plan_copies.cpp: see plan_copies.h. The flatbuffers binary format in brief (little-endian):
// the buffer starts with a uint32 offset to the root table; a table starts with an int32
// `soffset` and its vtable lives at `table - soffset`: uint16 vtable size, uint16 table size,
// then one uint16 per field id, the field's offset inside the table (0 = absent). A field that
// refers to a table, vector or string holds a uint32 offset relative to the field itself; a
// vector is a uint32 length followed by its elements (tables as uint32 relative offsets); a
// union field `x` takes two ids: `x_type` (uint8 tag), then `x`.
#include "examples/plan_copies.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace executorch_trt::examples {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::Result;

// Field ids in executorch/schema/program.fbs (the pinned wheel's schema).
constexpr int kProgramExecutionPlan = 1;
constexpr int kPlanName = 0;
constexpr int kPlanValues = 2;
constexpr int kPlanChains = 5;
constexpr int kPlanOperators = 6;
constexpr int kEValueValType = 0;
constexpr int kEValueVal = 1;
constexpr int kTensorScalarType = 0;
constexpr int kTensorSizes = 2;
constexpr int kTensorShapeDynamism = 8;
constexpr int kTensorExtraTensorInfo = 9;
constexpr int kExtraTensorInfoFullyQualifiedName = 1;
constexpr int kOperatorName = 0;
constexpr int kChainInstructions = 2;
constexpr int kInstructionArgsType = 0;
constexpr int kInstructionArgs = 1;
constexpr int kKernelCallOpIndex = 0;
constexpr int kKernelCallArgs = 1;

// Union tags (program.fbs: KernelTypes, InstructionArguments; 0 is NONE).
constexpr uint8_t kKernelTypesTensor = 5;
constexpr uint8_t kInstructionKernelCall = 1;
constexpr uint8_t kInstructionJumpFalseCall = 4;
// TensorShapeDynamism.STATIC.
constexpr int8_t kShapeStatic = 0;

// The program flatbuffer's file identifier (bytes 4..8): program.fbs `file_identifier`.
constexpr char kProgramIdentifier[] = "ET12";

// ExecuTorch's extended header (schema/extended_header.h): at byte 8, magic "eh00", uint32
// header length (>= 24), uint64 program size, uint64 segment base offset.
constexpr size_t kExtendedHeaderOffset = 8;
constexpr size_t kExtendedHeaderMinLength = 24;
constexpr size_t kHeadBytes = 64;

// Flatbuffers cannot exceed 2 GiB (offsets are 32-bit, signed soffsets).
constexpr uint64_t kMaxFlatbufferSize = (uint64_t{1} << 31) - 1;

constexpr const char* kCopyOp = "aten::copy_";
constexpr const char* kCopyIndexOp = "executorch_prim::et_copy_index";

// Bytes per element of `type` (ExecuTorch's own list of scalar types), or 0 if `type` is not
// one (elementSize() would abort on it).
size_t ElementSize(int8_t type) {
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

// A bounds-checked reader over one flatbuffer. The first failure is sticky: ok() turns false,
// error() says what and where, and every accessor from then on returns an empty value (absent
// table, empty vector, 0). Callers check ok() before trusting what they read.
class FlatbufferReader {
 public:
  // A table: `pos` is where it starts; `present` is false for an absent field or after an error.
  struct Table {
    bool present = false;
    size_t pos = 0;
    size_t vtable = 0;
    size_t vtable_size = 0;
    size_t table_size = 0;
  };
  // A vector: `size` elements of `width` bytes starting at `pos`.
  struct Vector {
    size_t pos = 0;
    uint32_t size = 0;
    size_t width = 0;
  };

  FlatbufferReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // The root table (the uint32 offset at byte 0).
  Table Root(const char* what) {
    if (!InBounds(0, 4)) return Fail<Table>(std::string("no root offset for ") + what);
    return TableAt(LoadLE(data_, 4), what);
  }

  // Scalar field `id` of `t` (`width` bytes, little-endian), or `fallback` if absent.
  uint64_t Scalar(const Table& t, int id, size_t width, uint64_t fallback, const char* what) {
    const size_t pos = FieldPos(t, id, width, what);
    return pos == 0 ? fallback : LoadLE(data_ + pos, width);
  }
  int32_t I32(const Table& t, int id, const char* what) {
    return static_cast<int32_t>(static_cast<uint32_t>(Scalar(t, id, 4, 0, what)));
  }
  int8_t I8(const Table& t, int id, const char* what) {
    return static_cast<int8_t>(static_cast<uint8_t>(Scalar(t, id, 1, 0, what)));
  }
  uint8_t U8(const Table& t, int id, const char* what) { return static_cast<uint8_t>(Scalar(t, id, 1, 0, what)); }

  // Table-valued field `id` of `t`; absent (present == false) if the field is.
  Table SubTable(const Table& t, int id, const char* what) {
    const size_t pos = FieldPos(t, id, 4, what);
    if (pos == 0) return Table{};
    return TableAt(uint64_t{pos} + LoadLE(data_ + pos, 4), what);
  }

  // Vector-valued field `id` of `t` with elements of `width` bytes; empty if absent.
  Vector VectorField(const Table& t, int id, size_t width, const char* what) {
    const size_t pos = FieldPos(t, id, 4, what);
    if (pos == 0) return Vector{};
    const uint64_t at = uint64_t{pos} + LoadLE(data_ + pos, 4);
    if (!InBounds(at, 4)) return Fail<Vector>(std::string(what) + ": vector offset out of range");
    const uint32_t n = static_cast<uint32_t>(LoadLE(data_ + at, 4));
    if (!InBounds(at + 4, uint64_t{n} * width)) {
      return Fail<Vector>(std::string(what) + ": vector of " + std::to_string(n) + " elements runs past the end");
    }
    return Vector{static_cast<size_t>(at + 4), n, width};
  }

  // String-valued field `id` of `t`; "" if absent.
  std::string String(const Table& t, int id, const char* what) {
    const Vector v = VectorField(t, id, 1, what);
    return std::string(reinterpret_cast<const char*>(data_ + v.pos), v.size);
  }

  // Element `i` of a vector of tables.
  Table TableIn(const Vector& v, uint32_t i, const char* what) {
    if (!ok()) return Table{};
    if (i >= v.size || v.width != 4) return Fail<Table>(std::string(what) + ": index out of range");
    const size_t pos = v.pos + size_t{i} * 4;
    return TableAt(uint64_t{pos} + LoadLE(data_ + pos, 4), what);
  }

  // Element `i` of a vector of int32.
  int32_t I32In(const Vector& v, uint32_t i, const char* what) {
    if (!ok()) return 0;
    if (i >= v.size || v.width != 4) return Fail<int32_t>(std::string(what) + ": index out of range");
    return static_cast<int32_t>(static_cast<uint32_t>(LoadLE(data_ + v.pos + size_t{i} * 4, 4)));
  }

 private:
  bool InBounds(uint64_t pos, uint64_t n) const { return pos <= size_ && n <= size_ - pos; }

  // Records the first failure; returns the empty value of T for the caller to return.
  template <typename T>
  T Fail(std::string message) {
    if (ok()) error_ = std::move(message);
    return T{};
  }

  // Validates the table at `pos` and its vtable.
  Table TableAt(uint64_t pos, const char* what) {
    if (!ok()) return Table{};
    if (!InBounds(pos, 4)) return Fail<Table>(std::string(what) + ": table offset out of range");
    const int64_t soffset = static_cast<int32_t>(static_cast<uint32_t>(LoadLE(data_ + pos, 4)));
    const int64_t vtable = static_cast<int64_t>(pos) - soffset;
    if (vtable < 0 || !InBounds(static_cast<uint64_t>(vtable), 4)) {
      return Fail<Table>(std::string(what) + ": vtable offset out of range");
    }
    Table t;
    t.present = true;
    t.pos = static_cast<size_t>(pos);
    t.vtable = static_cast<size_t>(vtable);
    t.vtable_size = LoadLE(data_ + t.vtable, 2);
    t.table_size = LoadLE(data_ + t.vtable + 2, 2);
    if (t.vtable_size < 4 || t.vtable_size % 2 != 0 || !InBounds(t.vtable, t.vtable_size) || t.table_size < 4 ||
        !InBounds(t.pos, t.table_size)) {
      return Fail<Table>(std::string(what) + ": malformed vtable");
    }
    return t;
  }

  // Where field `id` of `t` (`width` bytes inline) is, or 0 if the field is absent (or `t`
  // is, or an error happened). 0 is never a field's position: the root offset is there.
  size_t FieldPos(const Table& t, int id, size_t width, const char* what) {
    if (!ok() || !t.present) return 0;
    const size_t slot = 4 + 2 * static_cast<size_t>(id);
    if (slot + 2 > t.vtable_size) return 0;
    const size_t offset = LoadLE(data_ + t.vtable + slot, 2);
    if (offset == 0) return 0;
    if (offset < 4 || offset + width > t.table_size) {
      return Fail<size_t>(std::string(what) + ": field outside its table");
    }
    return t.pos + offset;
  }

  const uint8_t* data_;
  size_t size_;
  std::string error_;
};

// Static sizes, element size and name of one tensor value in a plan.
struct TensorFacts {
  uint64_t nbytes = 0;
  bool static_shape = true;
  std::string name;
};

// Reads value `index` of `values`, which must be a tensor. Sets *error on failure.
bool ReadTensor(FlatbufferReader* r, const FlatbufferReader::Vector& values, int32_t index, TensorFacts* out,
                std::string* error) {
  if (index < 0 || static_cast<uint32_t>(index) >= values.size) {
    *error = "value index " + std::to_string(index) + " outside the plan's " + std::to_string(values.size) +
             " values";
    return false;
  }
  const auto value = r->TableIn(values, static_cast<uint32_t>(index), "EValue");
  const uint8_t tag = r->U8(value, kEValueValType, "EValue.val_type");
  const auto tensor = r->SubTable(value, kEValueVal, "EValue.val");
  if (!r->ok()) return false;
  if (tag != kKernelTypesTensor || !tensor.present) {
    *error = "value #" + std::to_string(index) + " is not a tensor (EValue type tag " + std::to_string(tag) + ")";
    return false;
  }
  const int8_t scalar_type = r->I8(tensor, kTensorScalarType, "Tensor.scalar_type");
  const auto sizes = r->VectorField(tensor, kTensorSizes, 4, "Tensor.sizes");
  out->static_shape = r->I8(tensor, kTensorShapeDynamism, "Tensor.shape_dynamism") == kShapeStatic;
  const auto extra = r->SubTable(tensor, kTensorExtraTensorInfo, "Tensor.extra_tensor_info");
  out->name = r->String(extra, kExtraTensorInfoFullyQualifiedName, "ExtraTensorInfo.fully_qualified_name");
  if (!r->ok()) return false;
  uint64_t nbytes = ElementSize(scalar_type);
  if (nbytes == 0) {
    *error = "value #" + std::to_string(index) + " has unknown scalar type " + std::to_string(scalar_type);
    return false;
  }
  for (uint32_t d = 0; d < sizes.size; ++d) {
    const int32_t size = r->I32In(sizes, d, "Tensor.sizes");
    if (size < 0 || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(size), &nbytes)) {
      *error = "value #" + std::to_string(index) + " has an invalid size " + std::to_string(size) + " in dim " +
               std::to_string(d);
      return false;
    }
  }
  out->nbytes = nbytes;
  return r->ok();
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

Result<ProgramCopies> ParseProgramCopies(const uint8_t* data, size_t size, const std::string& source,
                                         std::string* error) {
  const std::string prefix = source + ": cannot read the execution plan: ";
  if (size < 8) {
    *error = prefix + "only " + std::to_string(size) + " bytes, too short for an ExecuTorch program";
    return Error::InvalidProgram;
  }
  if (std::memcmp(data + 4, kProgramIdentifier, 4) != 0) {
    *error = prefix + "file identifier '" + Printable(data + 4, 4) + "', expected '" + kProgramIdentifier +
             "' (not an ExecuTorch program, or one of another schema version)";
    return Error::InvalidProgram;
  }
  FlatbufferReader r(data, size);
  ProgramCopies program;
  std::string where = "Program";
  std::string problem;
  const auto root = r.Root("Program");
  const auto plans = r.VectorField(root, kProgramExecutionPlan, 4, "Program.execution_plan");
  for (uint32_t p = 0; r.ok() && problem.empty() && p < plans.size; ++p) {
    where = "execution plan " + std::to_string(p);
    const auto plan = r.TableIn(plans, p, "ExecutionPlan");
    MethodCopies method;
    method.method = r.String(plan, kPlanName, "ExecutionPlan.name");
    if (!r.ok()) break;
    where = "method '" + method.method + "'";
    const auto values = r.VectorField(plan, kPlanValues, 4, "ExecutionPlan.values");
    const auto operators = r.VectorField(plan, kPlanOperators, 4, "ExecutionPlan.operators");
    const auto chains = r.VectorField(plan, kPlanChains, 4, "ExecutionPlan.chains");
    std::vector<std::string> op_names;
    for (uint32_t o = 0; r.ok() && o < operators.size; ++o) {
      op_names.push_back(r.String(r.TableIn(operators, o, "Operator"), kOperatorName, "Operator.name"));
    }
    for (uint32_t c = 0; r.ok() && problem.empty() && c < chains.size; ++c) {
      const auto chain = r.TableIn(chains, c, "Chain");
      const auto instructions = r.VectorField(chain, kChainInstructions, 4, "Chain.instructions");
      for (uint32_t i = 0; r.ok() && problem.empty() && i < instructions.size; ++i) {
        where = "method '" + method.method + "', chain " + std::to_string(c) + ", instruction " + std::to_string(i);
        const auto instruction = r.TableIn(instructions, i, "Instruction");
        const uint8_t type = r.U8(instruction, kInstructionArgsType, "Instruction.instr_args_type");
        if (type == kInstructionJumpFalseCall) method.exact = false;
        if (type != kInstructionKernelCall) continue;
        const auto call = r.SubTable(instruction, kInstructionArgs, "Instruction.instr_args");
        const int32_t op_index = r.I32(call, kKernelCallOpIndex, "KernelCall.op_index");
        const auto args = r.VectorField(call, kKernelCallArgs, 4, "KernelCall.args");
        if (!r.ok()) break;
        if (!call.present) {
          problem = "KernelCall without arguments";
          break;
        }
        if (op_index < 0 || static_cast<size_t>(op_index) >= op_names.size()) {
          problem = "operator index " + std::to_string(op_index) + " outside the plan's " +
                    std::to_string(op_names.size()) + " operators";
          break;
        }
        const std::string& op = op_names[static_cast<size_t>(op_index)];
        const bool is_copy = op == kCopyOp;
        if (!is_copy && op != kCopyIndexOp) continue;
        // copy_: destination = last argument (the returned self), copies the destination's
        // size. et_copy_index(copy_to, copy_from, index): copies copy_from into copy_to.
        const uint32_t needed = is_copy ? 1 : 2;
        if (args.size < needed) {
          problem = op + " with " + std::to_string(args.size) + " arguments";
          break;
        }
        PlanCopy copy;
        copy.op = op;
        copy.chain = c;
        copy.instruction = i;
        copy.destination_value = r.I32In(args, is_copy ? args.size - 1 : 0, "KernelCall.args");
        TensorFacts destination, source_tensor;
        if (!ReadTensor(&r, values, copy.destination_value, &destination, &problem)) break;
        copy.destination_name = destination.name;
        copy.bytes = destination.nbytes;
        bool static_shape = destination.static_shape;
        if (!is_copy) {
          if (!ReadTensor(&r, values, r.I32In(args, 1, "KernelCall.args"), &source_tensor, &problem)) break;
          copy.bytes = source_tensor.nbytes;
          static_shape = static_shape && source_tensor.static_shape;
        }
        if (!static_shape) method.exact = false;
        method.copies.push_back(std::move(copy));
      }
    }
    if (r.ok() && problem.empty()) program.methods.push_back(std::move(method));
  }
  if (!r.ok() || !problem.empty()) {
    *error = prefix + (r.ok() ? problem : r.error()) + " (in " + where + "; the file is corrupt: re-export it)";
    return Error::InvalidProgram;
  }
  if (program.methods.empty()) {
    *error = prefix + "the program has no methods (the file is corrupt: re-export it)";
    return Error::InvalidProgram;
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
               std::to_string(header_length) + ", program size " + std::to_string(program_size) + ", file " +
               std::to_string(file_size) + " bytes)";
      return Error::InvalidProgram;
    }
  }
  if (program_size > kMaxFlatbufferSize) {
    std::fclose(f);
    *error = path + ": cannot read the execution plan: program of " + std::to_string(program_size) +
             " bytes, more than a flatbuffer can hold";
    return Error::InvalidProgram;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(program_size));
  std::memcpy(bytes.data(), head.data(), std::min(head.size(), bytes.size()));
  const size_t rest = bytes.size() - std::min(head.size(), bytes.size());
  const bool read = rest == 0 || std::fread(bytes.data() + head.size(), 1, rest, f) == rest;
  std::fclose(f);
  if (!read) {
    *error = path + ": cannot read " + std::to_string(program_size) + " bytes";
    return Error::AccessFailed;
  }
  return ParseProgramCopies(bytes.data(), bytes.size(), path, error);
}

}  // namespace executorch_trt::examples
