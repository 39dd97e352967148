// Copyright (c) executorch-trt authors.
//
// nested_program_checks.h: checks a portable engine's nested ExecuTorch program must pass
// before its method is loaded and executed, beyond what ExecuTorch 1.5.1 checks itself.
//
// Program::load(InternalConsistency) verifies the flatbuffer's structure (offsets, lengths,
// alignment), and Method::load resolves the kernels, but neither checks that the indices an
// instruction carries are in range: a KernelCall whose op_index is past the operator table
// is accepted at load and calls through a wild kernel pointer at execute (found by
// //tests/fuzz:backend_fuzzer; the blob checksum only stops accidental corruption). A planned
// memory buffer may also claim any size (the engine allocates it at init), and strings the
// runtime logs may hold invalid UTF-8 (which Python's log redirect throws on). These checks
// close that gap by reading the program's own execution plan.
#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>

namespace executorch_trt {

// Checks method `method_name` of the ExecuTorch program in [data, data + size) (the nested
// .pte of a portable payload). Returns Error::Ok when all of these hold, else
// Error::InvalidProgram with one ET_LOG line naming the method, the instruction, value or
// buffer index and the bad value ("the nested program is corrupt; re-export"):
//   - the flatbuffer verifies, and the program has an execution plan named `method_name`;
//   - every value index (plan and chain inputs/outputs, instruction arguments, move source
//     and destination, jump condition, freed value, tensor-list items) is < the number of
//     values; every KernelCall's op_index is < the number of operators; every
//     DelegateCall's delegate_index is < the number of delegates; every jump's destination
//     is within its chain; every instruction has one of the known argument types;
//   - every tensor value has a known dtype, non-negative sizes whose products from any
//     dimension inwards fit int32 (ExecuTorch's stride type), a dim order of its rank, and,
//     when memory-planned, a buffer id of the plan with its extent (offset + bytes) not
//     overflowing; a non-empty tensor that is neither memory-planned nor a constant (so
//     ExecuTorch gives it a null data pointer) is a method input or output (the engine binds
//     those), or is given data by a MoveCall (a torch.cond result) or an et_view (a view) on
//     every path through the method before any instruction reads it;
//   - every planned buffer (ids >= 1) is no larger than the extent of the tensors planned in it
//     rounded up to kNestedPlannedBufferSlack bytes (the engine allocates each buffer at init,
//     so a corrupt size must not make a small blob claim gigabytes);
//   - the method, operator, overload and delegate names are valid UTF-8 without control
//     characters;
//   - every KernelCall calls an operator in the runtime's schema table (operator_schemas.h,
//     generated at build time from every kernel the runtime registers), passes exactly the
//     number of values ExecuTorch's emitter writes for it, and each value has a type the
//     kernel reads it as (ExecuTorch's boxed kernels index the argument list unchecked and
//     convert each value with an EValue accessor whose ET_CHECK aborts the process on another
//     type: toTensor, toBool, toIntList, toScalar, ...). The log line names the instruction,
//     the operator, the argument index and name, the expected and the found type. An operator
//     missing from the table is rejected: the runtime has no kernel for it either, unless an
//     application registered one itself (the exporter never emits one);
//   - every int list item is an Int value; every tensor list item is a tensor (optional: or
//     null) value before the list (ExecuTorch reads them while parsing values in order);
//     every nested delegate call argument and freed value is a tensor; a move does not change
//     a value's type.
// Never reads outside [data, data + size). Thread-safe. Does not retain `data`.
executorch::runtime::Error CheckNestedProgram(const void* data, size_t size,
                                              const char* method_name);

// How far a planned buffer may exceed the end of the last tensor planned in it (alignment
// padding of ExecuTorch's memory planner).
inline constexpr size_t kNestedPlannedBufferSlack = 4096;

}  // namespace executorch_trt
