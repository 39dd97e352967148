// Copyright (c) executorch-trt authors.
//
// operator_schemas.cpp: lookup in the generated table (see operator_schemas.h).

#include "core/engine/portable/operator_schemas.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/schema/program_generated.h"

namespace executorch_trt {
namespace {

// Compares `schema_name` with name + "." + overload (or name alone) without building it.
int CompareJoined(const char* schema_name, const char* name, const char* overload) {
  const size_t n = std::strlen(name);
  int c = std::strncmp(schema_name, name, n);
  if (c != 0) return c;
  const char* rest = schema_name + n;
  if (overload == nullptr || overload[0] == '\0') return *rest == '\0' ? 0 : 1;
  if (*rest != '.') return static_cast<unsigned char>(*rest) - '.';
  return std::strcmp(rest + 1, overload);
}

}  // namespace

const OperatorSchema* FindOperatorSchema(const char* name, const char* overload) {
  if (name == nullptr) return nullptr;
  const OperatorSchemaTable table = GeneratedOperatorSchemas();
  const OperatorSchema* end = table.schemas + table.size;
  const OperatorSchema* it = std::lower_bound(
      table.schemas, end, 0,
      [&](const OperatorSchema& s, int) { return CompareJoined(s.name, name, overload) < 0; });
  if (it != end && CompareJoined(it->name, name, overload) == 0) return it;
  return nullptr;
}

const char* KernelTypeName(uint32_t type) {
  // The schema's own names (flatc's EnumNameKernelTypes; "" out of range).
  const char* name = type <= static_cast<uint32_t>(executorch_flatbuffer::KernelTypes::MAX)
                         ? executorch_flatbuffer::EnumNameKernelTypes(
                               static_cast<executorch_flatbuffer::KernelTypes>(type))
                         : "";
  return name[0] != '\0' ? name : "?";
}

const char* KernelTypeMaskText(uint16_t tags, char* buffer, size_t size) {
  if (size == 0) return buffer;
  buffer[0] = '\0';
  size_t used = 0;
  for (uint32_t t = 0; t < 16; ++t) {
    if ((tags & (1u << t)) == 0) continue;
    const int n =
        std::snprintf(buffer + used, size - used, "%s%s", used == 0 ? "" : "|", KernelTypeName(t));
    if (n < 0 || static_cast<size_t>(n) >= size - used) break;
    used += static_cast<size_t>(n);
  }
  return buffer;
}

}  // namespace executorch_trt
