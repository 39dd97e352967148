// Copyright (c) executorch-trt authors.
//
// operator_schemas.h: the argument types of every operator the runtime can run, for
// CheckNestedProgram (nested_program_checks.h).
//
// ExecuTorch 1.5.1's boxed kernels read their arguments with EValue::toTensor(), toBool(),
// toIntList(), toScalar(), ... whose ET_CHECK aborts the process when the value has another
// type, and index the argument list without checking its length. A .pte records no operator
// schemas, so a KernelCall whose argument points at a value of another type, or that has too
// few arguments, passes Program::load and Method::load and aborts (or reads past the list) at
// execute. The table is generated (gen_operator_schemas.py) from the schemas torch knows for
// every kernel the pinned ExecuTorch wheel registers and for the delegate's own kernels
// (core/kernels), checked in as operator_schemas.txt (one line per operator) and turned into
// C++ at build time (operator_schemas_to_cc.awk).
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch_trt {

// Bits of OperatorArgument::tags, one per flatbuffer value type
// (executorch_flatbuffer::KernelTypes): bit t = type t, named as the union names its members.
inline constexpr uint16_t kTagNull = 1u << 1;
inline constexpr uint16_t kTagInt = 1u << 2;
inline constexpr uint16_t kTagBool = 1u << 3;
inline constexpr uint16_t kTagDouble = 1u << 4;
inline constexpr uint16_t kTagTensor = 1u << 5;
inline constexpr uint16_t kTagString = 1u << 6;
inline constexpr uint16_t kTagIntList = 1u << 7;
inline constexpr uint16_t kTagDoubleList = 1u << 8;
inline constexpr uint16_t kTagBoolList = 1u << 9;
inline constexpr uint16_t kTagTensorList = 1u << 10;
inline constexpr uint16_t kTagOptionalTensorList = 1u << 11;

// One value a kernel call passes: its schema name and the flatbuffer value types
// (executorch_flatbuffer::KernelTypes) it may have, as a bitmask: bit t set = type t accepted.
struct OperatorArgument {
  const char* name;
  uint16_t tags;
};

// An operator, named as ExecuTorch resolves its kernel ("aten::add.out": name, '.', overload;
// just the name when the overload is empty), and its values
// arguments[first_argument, first_argument + num_arguments): every schema argument in order,
// then the return values ExecuTorch's emitter appends (gen_operator_schemas.py).
struct OperatorSchema {
  const char* name;
  uint32_t first_argument;
  uint32_t num_arguments;
};

// The generated table: `size` schemas sorted by name (strcmp order), and their arguments.
struct OperatorSchemaTable {
  const OperatorSchema* schemas;
  size_t size;
  const OperatorArgument* arguments;
};

// The table generated at build time from operator_schemas.txt.
OperatorSchemaTable GeneratedOperatorSchemas();

// The schema of the operator `name` with overload `overload` (null or empty: none), as
// ExecuTorch joins them to resolve a kernel, or nullptr if the table has no such operator.
// Never allocates; thread-safe.
const OperatorSchema* FindOperatorSchema(const char* name, const char* overload);

// The flatbuffer value type names used in log lines ("Tensor", "IntList", ...; "NONE" for 0 and
// "?" past the union), and "Tensor|Null"-style text for a bitmask into `buffer`.
const char* KernelTypeName(uint32_t type);
const char* KernelTypeMaskText(uint16_t tags, char* buffer, size_t size);

}  // namespace executorch_trt
