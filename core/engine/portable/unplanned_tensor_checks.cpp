// Copyright (c) executorch-trt authors.
//
// unplanned_tensor_checks.cpp: CheckUnplannedTensors (nested_plan.h).
//
// Every non-empty tensor with no data of its own (not planned, not a constant, not a method
// input or output the engine binds: ExecuTorch gives it a null data pointer) must be given data,
// as the destination of a MoveCall (a torch.cond result) or the output of an et_view (an
// unplanned view), on every path through the chain before any instruction reads it: a kernel
// reading or writing it before that goes through null. Paths follow both successors of every
// jump (an over-approximation: it can only reject more).

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/engine/portable/nested_plan.h"

namespace executorch_trt::nested_plan {
namespace {

using Instructions = flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>;

// What one instruction does to an unplanned tensor v on a path through it.
enum class Effect {
  kNone,       // neither reads v nor gives it data: the path goes on
  kReads,      // reads v, or a list that holds it
  kGivesData,  // gives v data (a move into it, an et_view writing it): the path is safe from here
};

// Whether operator `op` (in range) is executorch_prim::et_view.default.
bool IsEtView(const fb::ExecutionPlan& plan, uint32_t op) {
  const fb::Operator* o = plan.operators()->Get(op);
  return o->name() != nullptr && std::strcmp(o->name()->c_str(), "executorch_prim::et_view") == 0 &&
         o->overload() != nullptr && std::strcmp(o->overload()->c_str(), "default") == 0;
}

// The values passing which reads v: v itself and the lists whose items include it.
std::vector<bool> ValuesHolding(const NestedPlan& plan, uint32_t v) {
  std::vector<bool> holds_v(static_cast<size_t>(plan.num_values()), false);
  holds_v[v] = true;
  for (uint32_t l = 0; l < static_cast<uint32_t>(plan.num_values()); ++l) {
    const fb::EValue* value = plan.plan().values()->Get(l);
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
  return holds_v;
}

// One unplanned tensor and the facts about the plan its paths are judged by.
class UnplannedTensor {
 public:
  UnplannedTensor(const NestedPlan& plan, uint32_t v, const std::vector<bool>& et_view)
      : plan_(plan),
        v_(static_cast<int32_t>(v)),
        holds_v_(ValuesHolding(plan, v)),
        et_view_(et_view) {}

  Effect EffectOf(const fb::Instruction& instruction) const {
    switch (instruction.instr_args_type()) {
      case fb::InstructionArguments::KernelCall: {
        const fb::KernelCall* call = instruction.instr_args_as_KernelCall();
        const auto* args = call->args();
        // executorch_prim::et_view.default(self, size, out) points `out` at self's data
        // (ExecuTorch's emitter makes unplanned view outputs): it gives v data.
        if (et_view_[static_cast<uint32_t>(call->op_index())] && Size(args) == 3 &&
            args->Get(2) == v_ && !Reads(args->Get(0)) && !Reads(args->Get(1))) {
          return Effect::kGivesData;
        }
        return AnyReads(args) ? Effect::kReads : Effect::kNone;
      }
      case fb::InstructionArguments::DelegateCall:
        return AnyReads(instruction.instr_args_as_DelegateCall()->args()) ? Effect::kReads
                                                                          : Effect::kNone;
      case fb::InstructionArguments::MoveCall: {
        const fb::MoveCall* move = instruction.instr_args_as_MoveCall();
        if (Reads(move->move_from())) return Effect::kReads;
        // v has data from here on along this path.
        return move->move_to() == v_ ? Effect::kGivesData : Effect::kNone;
      }
      case fb::InstructionArguments::JumpFalseCall:
        return Reads(instruction.instr_args_as_JumpFalseCall()->cond_value_index()) ? Effect::kReads
                                                                                    : Effect::kNone;
      case fb::InstructionArguments::FreeCall:
        return Reads(instruction.instr_args_as_FreeCall()->value_index()) ? Effect::kReads
                                                                          : Effect::kNone;
      default:
        return Effect::kNone;
    }
  }

  // Follows every path from instruction 0; fails at the first instruction that reads v before
  // it was given data on that path.
  Error CheckPaths(const Instructions* instructions) const {
    const uint32_t n = Size(instructions);
    std::vector<bool> seen(n + 1, false);
    std::vector<uint32_t> pending = {0};
    while (!pending.empty()) {
      const uint32_t i = pending.back();
      pending.pop_back();
      if (i >= n || seen[i]) continue;
      seen[i] = true;
      const fb::Instruction& instruction = *instructions->Get(i);
      const Effect effect = EffectOf(instruction);
      if (effect == Effect::kGivesData) continue;
      if (effect == Effect::kReads) {
        return plan_.Fail(
            "a tensor with no data (not memory-planned, not a constant, not a method input or "
            "output, not yet given one by a move) is read",
            v_, i);
      }
      if (instruction.instr_args_type() == fb::InstructionArguments::JumpFalseCall) {
        pending.push_back(static_cast<uint32_t>(
            instruction.instr_args_as_JumpFalseCall()->destination_instruction()));
      }
      pending.push_back(i + 1);
    }
    return Error::Ok;
  }

 private:
  bool Reads(int64_t index) const { return plan_.IsValue(index) && holds_v_[index]; }

  bool AnyReads(const flatbuffers::Vector<int32_t>* args) const {
    for (uint32_t a = 0; a < Size(args); ++a) {
      if (Reads(args->Get(a))) return true;
    }
    return false;
  }

  const NestedPlan& plan_;
  const int32_t v_;
  const std::vector<bool> holds_v_;
  const std::vector<bool>& et_view_;
};

}  // namespace

Error CheckUnplannedTensors(const NestedPlan& plan, const std::vector<uint32_t>& unplanned) {
  if (unplanned.empty()) return Error::Ok;
  const fb::ExecutionPlan& p = plan.plan();
  if (Size(p.chains()) != 1) {
    return plan.Fail("a tensor has no data (and the method has several chains)", unplanned[0], 0);
  }
  // Once, not per tensor and instruction (CheckChain has range-checked every op_index).
  std::vector<bool> et_view(Size(p.operators()));
  for (uint32_t op = 0; op < et_view.size(); ++op) et_view[op] = IsEtView(p, op);
  for (uint32_t v : unplanned) {
    const Error err =
        UnplannedTensor(plan, v, et_view).CheckPaths(p.chains()->Get(0)->instructions());
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

}  // namespace executorch_trt::nested_plan
