#!/usr/bin/env bash
# The checked-in operator schema table ($1) must equal what gen_operator_schemas.py writes
# under the pinned environment ($2); a stale copy would let CheckNestedProgram accept or reject
# kernel calls by an old schema.
set -uo pipefail
if diff -u "$1" "$2"; then
  echo "operator_schemas_table.cc is up to date"
  exit 0
fi
echo
echo "core/engine/portable/operator_schemas_table.cc is stale (the pinned torch/ExecuTorch or an own"
echo "kernel's schema changed). Update it from the checkout:"
echo "  ./bazelw build //core/engine/portable:operator_schemas_table_regenerated &&"
echo "  cp bazel-bin/core/engine/portable/operator_schemas_table.regenerated.cc core/engine/portable/operator_schemas_table.cc"
exit 1
