// Copyright (c) executorch-trt authors.
//
// instruction_checks.cpp: CheckChain (nested_plan.h), one function per kind of instruction.
// ExecuTorch's loader does not range-check the indices an instruction carries (an operator
// index past the table calls through a wild kernel pointer at execute), and its boxed kernels
// index their argument list unchecked and convert each value with an EValue accessor whose
// ET_CHECK aborts the process on another type.

#include <cinttypes>
#include <cstdint>

#include <executorch/runtime/platform/log.h>

#include "core/engine/portable/nested_plan.h"
#include "core/engine/portable/operator_schemas.h"

namespace executorch_trt::nested_plan {
namespace {

// operator_schemas.h numbers the value types as the flatbuffer union does.
static_assert(kTagNull == 1u << static_cast<int>(fb::KernelTypes::Null) &&
                  kTagOptionalTensorList ==
                      1u << static_cast<int>(fb::KernelTypes::OptionalTensorList),
              "operator_schemas.h's kTag constants are the flatbuffer KernelTypes' bits");
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

// The kernel call's arguments against its operator's schema (operator_schemas.h): the
// operator is one the runtime has a schema for, the call passes exactly the values the
// emitter writes for it, and each value has a type the kernel reads it as.
Error CheckKernelArguments(const NestedPlan& plan, const fb::KernelCall& call, uint32_t i) {
  const fb::Operator* op = plan.plan().operators()->Get(static_cast<uint32_t>(call.op_index()));
  // Names are clean UTF-8 without NULs (CheckNames ran first).
  const char* name = op->name()->c_str();
  const char* overload = op->overload() == nullptr ? "" : op->overload()->c_str();
  const char* dot = overload[0] == '\0' ? "" : ".";
  const OperatorSchema* schema = FindOperatorSchema(name, overload);
  if (schema == nullptr) {
    ET_LOG(Error,
           "executorch_trt: nested method '%s': instruction %" PRIu32
           " calls '%s%s%s', which this runtime has no kernel for: export the program again "
           "with the ExecuTorch and executorch_trt of this runtime.",
           plan.method(), i, name, dot, overload);
    return Error::InvalidProgram;
  }
  const uint32_t n = Size(call.args());
  if (n != schema->num_arguments) {
    ET_LOG(Error,
           "executorch_trt: nested method '%s': instruction %" PRIu32
           " calls operator '%s' with %" PRIu32 " values, expected %" PRIu32 "; %s.",
           plan.method(), i, schema->name, n, schema->num_arguments, kCorrupt);
    return Error::InvalidProgram;
  }
  const OperatorArgument* arguments = GeneratedOperatorSchemas().arguments + schema->first_argument;
  for (uint32_t a = 0; a < n; ++a) {
    const int32_t index = call.args()->Get(a);
    const uint32_t type = static_cast<uint32_t>(plan.Type(index));
    if (type < 16 && (arguments[a].tags & (1u << type)) != 0) continue;
    char expected[128];
    ET_LOG(Error,
           "executorch_trt: nested method '%s': instruction %" PRIu32
           " calls operator '%s' with argument %" PRIu32 " ('%s') = value %" PRId32
           " of type %s, expected %s; %s.",
           plan.method(), i, schema->name, a, arguments[a].name, index, KernelTypeName(type),
           KernelTypeMaskText(arguments[a].tags, expected, sizeof(expected)), kCorrupt);
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

Error CheckKernelCall(const NestedPlan& plan, const fb::KernelCall& call, uint32_t i) {
  if (call.op_index() < 0 ||
      static_cast<uint32_t>(call.op_index()) >= Size(plan.plan().operators())) {
    return plan.Fail("a kernel call names an operator past the operator table", i, call.op_index());
  }
  Error err = plan.CheckIndices(call.args(), "kernel call argument");
  if (err != Error::Ok) return err;
  return CheckKernelArguments(plan, call, i);
}

Error CheckDelegateCall(const NestedPlan& plan, const fb::DelegateCall& call, uint32_t i) {
  if (call.delegate_index() < 0 ||
      static_cast<uint32_t>(call.delegate_index()) >= Size(plan.plan().delegates())) {
    return plan.Fail("a delegate call names a delegate past the delegate table", i,
                     call.delegate_index());
  }
  Error err = plan.CheckIndices(call.args(), "delegate call argument");
  if (err != Error::Ok) return err;
  // A nested delegate (XNNPACK) reads every argument with EValue::toTensor() (ET_CHECK).
  for (uint32_t a = 0; a < Size(call.args()); ++a) {
    if (plan.Type(call.args()->Get(a)) != fb::KernelTypes::Tensor) {
      return plan.Fail("a delegate call argument is not a tensor", a, call.args()->Get(a));
    }
  }
  return Error::Ok;
}

Error CheckMoveCall(const NestedPlan& plan, const fb::MoveCall& move, uint32_t i) {
  if (!plan.IsValue(move.move_from())) return plan.Fail("a move source", i, move.move_from());
  if (!plan.IsValue(move.move_to())) return plan.Fail("a move destination", i, move.move_to());
  // A move replaces the destination value (type included): a value of another type there
  // would reach the kernels that read the destination, which were checked against its
  // type in the program.
  if (plan.Type(move.move_from()) != plan.Type(move.move_to())) {
    return plan.Fail("a move changes a value's type", i, move.move_to());
  }
  return Error::Ok;
}

Error CheckJumpFalseCall(const NestedPlan& plan, const fb::JumpFalseCall& jump, uint32_t chain_size,
                         uint32_t i) {
  if (!plan.IsValue(jump.cond_value_index())) {
    return plan.Fail("a jump condition", i, jump.cond_value_index());
  }
  if (jump.destination_instruction() < 0 ||
      static_cast<uint32_t>(jump.destination_instruction()) > chain_size) {
    return plan.Fail("a jump leaves its chain", i, jump.destination_instruction());
  }
  return Error::Ok;
}

Error CheckFreeCall(const NestedPlan& plan, const fb::FreeCall& free_call, uint32_t i) {
  if (!plan.IsValue(free_call.value_index())) {
    return plan.Fail("a freed value", i, free_call.value_index());
  }
  // ExecuTorch frees a tensor's data (EValue::toTensor(): ET_CHECK).
  if (plan.Type(free_call.value_index()) != fb::KernelTypes::Tensor) {
    return plan.Fail("a freed value is not a tensor", i, free_call.value_index());
  }
  return Error::Ok;
}

Error CheckInstruction(const NestedPlan& plan, const fb::Instruction& instruction,
                       uint32_t chain_size, uint32_t i) {
  // A union whose type is set may still have no table (the flatbuffer verifies).
  if (instruction.instr_args() == nullptr) {
    return plan.Fail("an instruction has no arguments", i,
                     static_cast<int64_t>(instruction.instr_args_type()));
  }
  switch (instruction.instr_args_type()) {
    case fb::InstructionArguments::KernelCall:
      return CheckKernelCall(plan, *instruction.instr_args_as_KernelCall(), i);
    case fb::InstructionArguments::DelegateCall:
      return CheckDelegateCall(plan, *instruction.instr_args_as_DelegateCall(), i);
    case fb::InstructionArguments::MoveCall:
      return CheckMoveCall(plan, *instruction.instr_args_as_MoveCall(), i);
    case fb::InstructionArguments::JumpFalseCall:
      return CheckJumpFalseCall(plan, *instruction.instr_args_as_JumpFalseCall(), chain_size, i);
    case fb::InstructionArguments::FreeCall:
      return CheckFreeCall(plan, *instruction.instr_args_as_FreeCall(), i);
    default:
      return plan.Fail("an instruction of unknown type", i,
                       static_cast<int64_t>(instruction.instr_args_type()));
  }
}

}  // namespace

Error CheckChain(const NestedPlan& plan, const fb::Chain& chain, uint32_t c) {
  Error err = plan.CheckIndices(chain.inputs(), "chain input");
  if (err == Error::Ok) err = plan.CheckIndices(chain.outputs(), "chain output");
  if (err != Error::Ok) return err;
  const uint32_t n = Size(chain.instructions());
  for (uint32_t i = 0; i < n; ++i) {
    const fb::Instruction* instruction = chain.instructions()->Get(i);
    err = CheckInstruction(plan, *instruction, n, i);
    if (err != Error::Ok) {
      ET_LOG(Error,
             "executorch_trt: nested method '%s': at chain %" PRIu32 ", instruction %" PRIu32 ".",
             plan.method(), c, i);
      return err;
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::nested_plan
