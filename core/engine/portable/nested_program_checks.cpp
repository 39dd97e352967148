// Copyright (c) executorch-trt authors.
//
// nested_program_checks.cpp: see nested_program_checks.h. The program flatbuffer is read with
// the C++ code flatc generates from ExecuTorch's own schema (//core/schema:program_schema),
// after flatbuffers::Verifier has checked every offset, length and alignment in it.

#include "core/engine/portable/nested_program_checks.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/log.h>

// libexecutorch.so exports the inline functions of its own FlatBuffers release and of its own
// code generated from this schema under the same names as ours; hidden, each side binds to its
// own (as in examples/plan_copies.cpp).
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"
#pragma GCC visibility pop

#include "core/engine/portable/operator_schemas.h"

namespace executorch_trt {
namespace {

namespace fb = executorch_flatbuffer;
using executorch::runtime::Error;

constexpr const char* kCorrupt = "the nested program is corrupt; re-export";

// operator_schemas.h numbers the value types as the flatbuffer union does.
static_assert(static_cast<int>(fb::KernelTypes::Null) == 1 &&
                  static_cast<int>(fb::KernelTypes::Int) == 2 &&
                  static_cast<int>(fb::KernelTypes::Bool) == 3 &&
                  static_cast<int>(fb::KernelTypes::Double) == 4 &&
                  static_cast<int>(fb::KernelTypes::Tensor) == 5 &&
                  static_cast<int>(fb::KernelTypes::String) == 6 &&
                  static_cast<int>(fb::KernelTypes::IntList) == 7 &&
                  static_cast<int>(fb::KernelTypes::DoubleList) == 8 &&
                  static_cast<int>(fb::KernelTypes::BoolList) == 9 &&
                  static_cast<int>(fb::KernelTypes::TensorList) == 10 &&
                  static_cast<int>(fb::KernelTypes::OptionalTensorList) == 11 &&
                  static_cast<int>(fb::KernelTypes::MAX) == 11,
              "operator_schemas.h's value type bits are the flatbuffer KernelTypes");

template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// Bytes per element of `type`, or 0 if it is not one of ExecuTorch's scalar types.
size_t ElementSize(fb::ScalarType type) {
  switch (static_cast<executorch::aten::ScalarType>(type)) {
#define EXECUTORCH_TRT_ELEMENT_SIZE(ctype, name) \
  case executorch::aten::ScalarType::name:       \
    return sizeof(ctype);
    ET_FORALL_SCALAR_TYPES(EXECUTORCH_TRT_ELEMENT_SIZE)
#undef EXECUTORCH_TRT_ELEMENT_SIZE
    default:
      return 0;
  }
}

// True for valid UTF-8 with no ASCII control characters (what may be logged safely).
bool IsCleanUtf8(const flatbuffers::String* s) {
  if (s == nullptr) return true;
  const auto* p = reinterpret_cast<const uint8_t*>(s->data());
  const size_t n = s->size();
  for (size_t i = 0; i < n;) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += len;
  }
  return true;
}

// Checks one execution plan; `method` names it in log lines.
class PlanChecker {
 public:
  PlanChecker(const fb::ExecutionPlan& plan, const char* method)
      : plan_(plan), method_(method), num_values_(Size(plan.values())) {}

  Error Check() {
    if (plan_.values() == nullptr) return Fail("has no value table", -1, 0);
    Error err = CheckIndices(plan_.inputs(), "method input");
    if (err == Error::Ok) err = CheckIndices(plan_.outputs(), "method output");
    if (err == Error::Ok) err = CheckNames();
    if (err == Error::Ok) err = CheckValues();
    if (err == Error::Ok) err = CheckPlannedBuffers();
    for (uint32_t c = 0; err == Error::Ok && c < Size(plan_.chains()); ++c) {
      err = CheckChain(*plan_.chains()->Get(c), c);
    }
    if (err == Error::Ok) err = CheckUnplannedTensors();
    return err;
  }

 private:
  Error Fail(const char* what, int64_t index, int64_t value) {
    ET_LOG(Error,
           "executorch_trt: nested method '%s': %s (index %" PRId64 ", value %" PRId64 "); %s.",
           method_, what, index, value, kCorrupt);
    return Error::InvalidProgram;
  }

  bool IsValue(int64_t index) const { return index >= 0 && index < num_values_; }

  // Every non-empty tensor with no data of its own (not planned, not a constant, not a method
  // input or output the engine binds: ExecuTorch gives it a null data pointer) must be given
  // data, as the destination of a MoveCall (a torch.cond result) or the output of an et_view
  // (an unplanned view), on every path through the chain before any instruction reads it: a kernel
  // reading or writing it before that goes through null. Paths follow both successors of every jump
  // (an over-approximation: it can only reject more).
  Error CheckUnplannedTensors() {
    if (unplanned_.empty()) return Error::Ok;
    if (Size(plan_.chains()) != 1) {
      return Fail("a tensor has no data (and the method has several chains)", unplanned_[0], 0);
    }
    const auto* instructions = plan_.chains()->Get(0)->instructions();
    const uint32_t n = Size(instructions);
    // Once, not per tensor and instruction (CheckChain has range-checked every op_index).
    std::vector<bool> et_view(Size(plan_.operators()));
    for (uint32_t op = 0; op < et_view.size(); ++op) et_view[op] = IsEtView(op);
    for (uint32_t v : unplanned_) {
      // Lists whose items include v: passing one reads v.
      std::vector<bool> holds_v(static_cast<size_t>(num_values_), false);
      holds_v[v] = true;
      for (uint32_t l = 0; l < static_cast<uint32_t>(num_values_); ++l) {
        const fb::EValue* value = plan_.values()->Get(l);
        const flatbuffers::Vector<int32_t>* items = nullptr;
        if (value->val_type() == fb::KernelTypes::TensorList) {
          items = value->val_as_TensorList()->items();
        } else if (value->val_type() == fb::KernelTypes::OptionalTensorList) {
          items = value->val_as_OptionalTensorList()->items();
        }
        for (uint32_t k = 0; k < Size(items); ++k) {
          if (items->Get(k) == static_cast<int32_t>(v)) holds_v[l] = true;
        }
      }
      const auto reads = [&](int64_t index) { return IsValue(index) && holds_v[index]; };
      std::vector<bool> seen(n + 1, false);
      std::vector<uint32_t> pending = {0};
      while (!pending.empty()) {
        const uint32_t i = pending.back();
        pending.pop_back();
        if (i >= n || seen[i]) continue;
        seen[i] = true;
        const fb::Instruction* instruction = instructions->Get(i);
        const flatbuffers::Vector<int32_t>* args = nullptr;
        bool read = false;
        switch (instruction->instr_args_type()) {
          case fb::InstructionArguments::KernelCall: {
            const fb::KernelCall* call = instruction->instr_args_as_KernelCall();
            args = call->args();
            // executorch_prim::et_view.default(self, size, out) points `out` at self's data
            // (ExecuTorch's emitter makes unplanned view outputs): it gives v data.
            if (et_view[static_cast<uint32_t>(call->op_index())] && Size(args) == 3 &&
                args->Get(2) == static_cast<int32_t>(v) && !reads(args->Get(0)) &&
                !reads(args->Get(1))) {
              continue;
            }
            break;
          }
          case fb::InstructionArguments::DelegateCall:
            args = instruction->instr_args_as_DelegateCall()->args();
            break;
          case fb::InstructionArguments::MoveCall: {
            const fb::MoveCall* move = instruction->instr_args_as_MoveCall();
            if (reads(move->move_from())) {
              read = true;
            } else if (move->move_to() == static_cast<int32_t>(v)) {
              continue;  // v has data from here on along this path
            }
            break;
          }
          case fb::InstructionArguments::JumpFalseCall: {
            const fb::JumpFalseCall* jump = instruction->instr_args_as_JumpFalseCall();
            read = reads(jump->cond_value_index());
            pending.push_back(static_cast<uint32_t>(jump->destination_instruction()));
            break;
          }
          case fb::InstructionArguments::FreeCall:
            read = reads(instruction->instr_args_as_FreeCall()->value_index());
            break;
          default:
            break;
        }
        for (uint32_t a = 0; a < Size(args) && !read; ++a) read = reads(args->Get(a));
        if (read) {
          return Fail(
              "a tensor with no data (not memory-planned, not a constant, not a method input or "
              "output, not yet given one by a move) is read",
              v, i);
        }
        pending.push_back(i + 1);
      }
    }
    return Error::Ok;
  }

  // Whether operator `op` (in range) is executorch_prim::et_view.default.
  bool IsEtView(uint32_t op) const {
    const fb::Operator* o = plan_.operators()->Get(op);
    return o->name() != nullptr &&
           std::strcmp(o->name()->c_str(), "executorch_prim::et_view") == 0 &&
           o->overload() != nullptr && std::strcmp(o->overload()->c_str(), "default") == 0;
  }

  // Whether value `v` is a method input or output (the engine binds their data).
  bool IsBound(uint32_t v) const {
    for (const auto* list : {plan_.inputs(), plan_.outputs()}) {
      for (uint32_t i = 0; i < Size(list); ++i) {
        if (list->Get(i) == static_cast<int32_t>(v)) return true;
      }
    }
    return false;
  }

  // The type of value `index` (in range).
  fb::KernelTypes Type(int64_t index) const {
    return plan_.values()->Get(static_cast<uint32_t>(index))->val_type();
  }

  Error CheckIndices(const flatbuffers::Vector<int32_t>* indices, const char* what) {
    for (uint32_t i = 0; i < Size(indices); ++i) {
      if (!IsValue(indices->Get(i))) return Fail(what, i, indices->Get(i));
    }
    return Error::Ok;
  }

  Error CheckNames() {
    if (!IsCleanUtf8(plan_.name())) return Fail("its name is not clean UTF-8", -1, 0);
    for (uint32_t i = 0; i < Size(plan_.operators()); ++i) {
      const fb::Operator* op = plan_.operators()->Get(i);
      if (op->name() == nullptr || op->name()->size() == 0) {
        return Fail("an operator has no name", i, 0);
      }
      if (!IsCleanUtf8(op->name()) || !IsCleanUtf8(op->overload())) {
        return Fail("an operator name or overload is not clean UTF-8", i, 0);
      }
    }
    for (uint32_t i = 0; i < Size(plan_.delegates()); ++i) {
      if (!IsCleanUtf8(plan_.delegates()->Get(i)->id())) {
        return Fail("a delegate id is not clean UTF-8", i, 0);
      }
    }
    return Error::Ok;
  }

  Error CheckValues() {
    const uint32_t num_buffers = Size(plan_.non_const_buffer_sizes());
    extents_.assign(num_buffers, 0);
    for (uint32_t v = 0; v < static_cast<uint32_t>(num_values_); ++v) {
      const fb::EValue* value = plan_.values()->Get(v);
      const bool read = value->val_type() == fb::KernelTypes::Tensor ||
                        value->val_type() == fb::KernelTypes::TensorList ||
                        value->val_type() == fb::KernelTypes::OptionalTensorList ||
                        value->val_type() == fb::KernelTypes::IntList;
      if (read && value->val() == nullptr) {
        return Fail("a tensor or tensor list value has no table", v,
                    static_cast<int64_t>(value->val_type()));
      }
      switch (value->val_type()) {
        case fb::KernelTypes::IntList: {
          // BoxedEvalueList<int64_t> reads each item with EValue::toInt() (ET_CHECK) when a
          // kernel asks for the list.
          const auto* items = value->val_as_IntList()->items();
          // As for the planned buffer sizes: the verifier does not align 8-byte elements.
          if (items != nullptr &&
              reinterpret_cast<uintptr_t>(items->Data()) % alignof(int64_t) != 0) {
            return Fail("an int list is misaligned", v, 0);
          }
          for (uint32_t i = 0; i < Size(items); ++i) {
            if (!IsValue(items->Get(i))) return Fail("int list item", v, items->Get(i));
            if (Type(items->Get(i)) != fb::KernelTypes::Int) {
              return Fail("an int list item is not an Int", v, items->Get(i));
            }
          }
          break;
        }
        case fb::KernelTypes::TensorList: {
          // ExecuTorch's parseTensorList reads each item as a tensor while it parses the values
          // in order: the items must be tensors parsed before the list.
          const auto* items = value->val_as_TensorList()->items();
          Error err = CheckIndices(items, "tensor list item");
          if (err != Error::Ok) return err;
          for (uint32_t i = 0; i < Size(items); ++i) {
            if (Type(items->Get(i)) != fb::KernelTypes::Tensor ||
                static_cast<uint32_t>(items->Get(i)) >= v) {
              return Fail("a tensor list item is not a tensor value before the list", v,
                          items->Get(i));
            }
          }
          break;
        }
        case fb::KernelTypes::OptionalTensorList: {
          const auto* items = value->val_as_OptionalTensorList()->items();
          for (uint32_t i = 0; i < Size(items); ++i) {
            // -1 is an absent tensor.
            if (items->Get(i) == -1) continue;
            if (!IsValue(items->Get(i))) {
              return Fail("optional tensor list item", v, items->Get(i));
            }
            const fb::KernelTypes t = Type(items->Get(i));
            if ((t != fb::KernelTypes::Tensor && t != fb::KernelTypes::Null) ||
                static_cast<uint32_t>(items->Get(i)) >= v) {
              return Fail(
                  "an optional tensor list item is not a tensor or null value before "
                  "the list",
                  v, items->Get(i));
            }
          }
          break;
        }
        case fb::KernelTypes::Tensor: {
          Error err = CheckTensor(*value->val_as_Tensor(), v);
          if (err != Error::Ok) return err;
          break;
        }
        default:
          break;
      }
    }
    return Error::Ok;
  }

  Error CheckTensor(const fb::Tensor& tensor, uint32_t v) {
    uint64_t nbytes = ElementSize(tensor.scalar_type());
    if (nbytes == 0) return Fail("a tensor has an unknown dtype", v, int(tensor.scalar_type()));
    const auto* sizes = tensor.sizes();
    // ExecuTorch (and the engine) store strides as int32: the product of the sizes from any
    // dimension to the innermost must fit, or computing the contiguous strides overflows.
    int64_t suffix = 1;
    for (uint32_t d = Size(sizes); d-- > 0;) {
      const int32_t s = sizes->Get(d);
      if (s < 0) return Fail("a tensor has a negative size", v, s);
      suffix *= s;  // both factors <= INT32_MAX: no int64 overflow
      if (suffix > INT32_MAX) return Fail("a tensor's strides overflow int32", v, s);
      nbytes *= static_cast<uint64_t>(s);  // <= 8 * INT32_MAX
    }
    if (tensor.dim_order() != nullptr && Size(tensor.dim_order()) != Size(sizes)) {
      return Fail("a tensor's dim order does not match its rank", v, Size(tensor.dim_order()));
    }
    const fb::AllocationDetails* where = tensor.allocation_info();
    if (where == nullptr) {
      // ExecuTorch gives a tensor data only from its memory plan, the program's constants or
      // (EXTERNAL) the named data; any other tensor has a null data pointer until the
      // application binds it, which the engine does for the method's inputs and outputs only.
      // A kernel writing a non-empty one writes through null.
      const bool constant =
          tensor.data_buffer_idx() > 0 ||
          (tensor.extra_tensor_info() != nullptr &&
           tensor.extra_tensor_info()->location() == fb::TensorDataLocation::EXTERNAL);
      // ExecuTorch's emitter leaves a torch.cond result and a view's output unplanned: a
      // MoveCall or the et_view kernel gives them data (CheckUnplannedTensors).
      if (!constant && nbytes > 0 && !IsBound(v)) unplanned_.push_back(v);
      return Error::Ok;
    }
    if (where->memory_id() >= extents_.size()) {
      return Fail("a tensor is planned in a buffer the method does not have", v,
                  where->memory_id());
    }
    const uint64_t offset =
        (uint64_t{where->memory_offset_high()} << 32) | where->memory_offset_low();
    uint64_t end = 0;
    if (__builtin_add_overflow(offset, nbytes, &end)) {
      return Fail("a planned tensor's extent overflows", v, static_cast<int64_t>(offset));
    }
    extents_[where->memory_id()] = std::max(extents_[where->memory_id()], end);
    return Error::Ok;
  }

  Error CheckPlannedBuffers() {
    // flatbuffers' verifier aligns a vector's length, not its 8-byte elements; a builder
    // always aligns them (and the buffer is aligned here), so a misaligned table is corrupt,
    // and reading it would be a misaligned load (UBSan).
    const auto* sizes = plan_.non_const_buffer_sizes();
    if (sizes != nullptr && reinterpret_cast<uintptr_t>(sizes->Data()) % alignof(int64_t) != 0) {
      return Fail("the planned buffer sizes are misaligned", -1, 0);
    }
    // Buffer 0 is reserved (constants); the engine allocates buffers 1..n at init.
    for (uint32_t id = 1; id < extents_.size(); ++id) {
      const int64_t size = sizes->Get(id);
      if (size < 0) return Fail("a planned buffer has a negative size", id, size);
      if (static_cast<uint64_t>(size) > extents_[id] + kNestedPlannedBufferSlack) {
        return Fail("a planned buffer is larger than the tensors planned in it", id, size);
      }
    }
    return Error::Ok;
  }

  Error CheckChain(const fb::Chain& chain, uint32_t c) {
    Error err = CheckIndices(chain.inputs(), "chain input");
    if (err == Error::Ok) err = CheckIndices(chain.outputs(), "chain output");
    if (err != Error::Ok) return err;
    const uint32_t n = Size(chain.instructions());
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Instruction* instruction = chain.instructions()->Get(i);
      err = CheckInstruction(*instruction, n, i);
      if (err != Error::Ok) {
        ET_LOG(Error,
               "executorch_trt: nested method '%s': at chain %" PRIu32 ", instruction %" PRIu32 ".",
               method_, c, i);
        return err;
      }
    }
    return Error::Ok;
  }

  Error CheckInstruction(const fb::Instruction& instruction, uint32_t chain_size, uint32_t i) {
    // A union whose type is set may still have no table (the flatbuffer verifies).
    if (instruction.instr_args() == nullptr) {
      return Fail("an instruction has no arguments", i,
                  static_cast<int64_t>(instruction.instr_args_type()));
    }
    switch (instruction.instr_args_type()) {
      case fb::InstructionArguments::KernelCall: {
        const fb::KernelCall* call = instruction.instr_args_as_KernelCall();
        if (call->op_index() < 0 ||
            static_cast<uint32_t>(call->op_index()) >= Size(plan_.operators())) {
          return Fail("a kernel call names an operator past the operator table", i,
                      call->op_index());
        }
        Error err = CheckIndices(call->args(), "kernel call argument");
        if (err != Error::Ok) return err;
        return CheckKernelArguments(*call, i);
      }
      case fb::InstructionArguments::DelegateCall: {
        const fb::DelegateCall* call = instruction.instr_args_as_DelegateCall();
        if (call->delegate_index() < 0 ||
            static_cast<uint32_t>(call->delegate_index()) >= Size(plan_.delegates())) {
          return Fail("a delegate call names a delegate past the delegate table", i,
                      call->delegate_index());
        }
        Error err = CheckIndices(call->args(), "delegate call argument");
        if (err != Error::Ok) return err;
        // A nested delegate (XNNPACK) reads every argument with EValue::toTensor() (ET_CHECK).
        for (uint32_t a = 0; a < Size(call->args()); ++a) {
          if (Type(call->args()->Get(a)) != fb::KernelTypes::Tensor) {
            return Fail("a delegate call argument is not a tensor", a, call->args()->Get(a));
          }
        }
        return Error::Ok;
      }
      case fb::InstructionArguments::MoveCall: {
        const fb::MoveCall* move = instruction.instr_args_as_MoveCall();
        if (!IsValue(move->move_from())) return Fail("a move source", i, move->move_from());
        if (!IsValue(move->move_to())) return Fail("a move destination", i, move->move_to());
        // A move replaces the destination value (type included): a value of another type there
        // would reach the kernels that read the destination, which were checked against its
        // type in the program.
        if (Type(move->move_from()) != Type(move->move_to())) {
          return Fail("a move changes a value's type", i, move->move_to());
        }
        return Error::Ok;
      }
      case fb::InstructionArguments::JumpFalseCall: {
        const fb::JumpFalseCall* jump = instruction.instr_args_as_JumpFalseCall();
        if (!IsValue(jump->cond_value_index())) {
          return Fail("a jump condition", i, jump->cond_value_index());
        }
        if (jump->destination_instruction() < 0 ||
            static_cast<uint32_t>(jump->destination_instruction()) > chain_size) {
          return Fail("a jump leaves its chain", i, jump->destination_instruction());
        }
        return Error::Ok;
      }
      case fb::InstructionArguments::FreeCall: {
        const fb::FreeCall* free_call = instruction.instr_args_as_FreeCall();
        if (!IsValue(free_call->value_index())) {
          return Fail("a freed value", i, free_call->value_index());
        }
        // ExecuTorch frees a tensor's data (EValue::toTensor(): ET_CHECK).
        if (Type(free_call->value_index()) != fb::KernelTypes::Tensor) {
          return Fail("a freed value is not a tensor", i, free_call->value_index());
        }
        return Error::Ok;
      }
      default:
        return Fail("an instruction of unknown type", i,
                    static_cast<int64_t>(instruction.instr_args_type()));
    }
  }

  // The kernel call's arguments against its operator's schema (operator_schemas.h): the
  // operator is one the runtime has a schema for, the call passes exactly the values the
  // emitter writes for it, and each value has a type the kernel reads it as. ExecuTorch's
  // boxed kernels index the argument list unchecked and convert each value with an EValue
  // accessor whose ET_CHECK aborts the process on another type.
  Error CheckKernelArguments(const fb::KernelCall& call, uint32_t i) {
    const fb::Operator* op = plan_.operators()->Get(static_cast<uint32_t>(call.op_index()));
    // Names are clean UTF-8 without NULs (CheckNames ran first).
    const char* name = op->name()->c_str();
    const char* overload = op->overload() == nullptr ? "" : op->overload()->c_str();
    const char* dot = overload[0] == '\0' ? "" : ".";
    const OperatorSchema* schema = FindOperatorSchema(name, overload);
    if (schema == nullptr) {
      ET_LOG(Error,
             "executorch_trt: nested method '%s': instruction %" PRIu32
             " calls operator '%s%s%s', which is not one the runtime has a kernel schema for, "
             "so its arguments cannot be checked; %s.",
             method_, i, name, dot, overload, kCorrupt);
      return Error::InvalidProgram;
    }
    const uint32_t n = Size(call.args());
    if (n != schema->num_arguments) {
      ET_LOG(Error,
             "executorch_trt: nested method '%s': instruction %" PRIu32
             " calls operator '%s' with %" PRIu32 " values, expected %" PRIu32 "; %s.",
             method_, i, schema->name, n, schema->num_arguments, kCorrupt);
      return Error::InvalidProgram;
    }
    const OperatorArgument* arguments =
        GeneratedOperatorSchemas().arguments + schema->first_argument;
    for (uint32_t a = 0; a < n; ++a) {
      const int32_t index = call.args()->Get(a);
      const uint32_t type = static_cast<uint32_t>(Type(index));
      if (type < 16 && (arguments[a].tags & (1u << type)) != 0) continue;
      char expected[128];
      ET_LOG(Error,
             "executorch_trt: nested method '%s': instruction %" PRIu32
             " calls operator '%s' with argument %" PRIu32 " ('%s') = value %" PRId32
             " of type %s, expected %s; %s.",
             method_, i, schema->name, a, arguments[a].name, index, KernelTypeName(type),
             KernelTypeMaskText(arguments[a].tags, expected, sizeof(expected)), kCorrupt);
      return Error::InvalidProgram;
    }
    return Error::Ok;
  }

  const fb::ExecutionPlan& plan_;
  const char* method_;
  const int64_t num_values_;
  std::vector<uint64_t> extents_;    // by planned buffer id: end of the last tensor in it
  std::vector<uint32_t> unplanned_;  // non-empty tensors ExecuTorch gives no data
};

}  // namespace

Error CheckNestedProgram(const void* data, size_t size, const char* method_name) {
  if (data == nullptr || size < 8) {
    ET_LOG(Error, "executorch_trt: the nested program is %zu bytes; %s.", size, kCorrupt);
    return Error::InvalidProgram;
  }
  // A flatbuffer cannot reach past this (the verifier asserts a smaller buffer): what follows
  // it, e.g. segments, is never part of the program table.
  size = std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  // The verifier and the accessors load scalars in place: give them an aligned buffer.
  std::unique_ptr<std::max_align_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) != 0) {
    aligned.reset(
        new (std::nothrow)
            std::max_align_t[(size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
    if (aligned == nullptr) return Error::MemoryAllocationFailed;
    std::memcpy(aligned.get(), data, size);
    data = aligned.get();
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  flatbuffers::Verifier verifier(bytes, size);
  if (!flatbuffers::BufferHasIdentifier(bytes, fb::ProgramIdentifier()) ||
      !fb::VerifyProgramBuffer(verifier)) {
    ET_LOG(Error, "executorch_trt: the nested program fails flatbuffer verification; %s.",
           kCorrupt);
    return Error::InvalidProgram;
  }
  const fb::Program* program = fb::GetProgram(bytes);
  for (uint32_t i = 0; i < Size(program->execution_plan()); ++i) {
    const fb::ExecutionPlan* plan = program->execution_plan()->Get(i);
    if (plan->name() != nullptr && plan->name()->str() == method_name) {
      return PlanChecker(*plan, method_name).Check();
    }
  }
  ET_LOG(Error, "executorch_trt: the nested program has no method '%s'; %s.", method_name,
         kCorrupt);
  return Error::InvalidProgram;
}

}  // namespace executorch_trt
