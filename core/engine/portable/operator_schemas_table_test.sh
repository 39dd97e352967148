#!/usr/bin/env bash
# The checked-in operator schema table ($1) must equal what gen_operator_schemas.py writes
# under the pinned environment ($2); a stale copy would let CheckNestedProgram accept or reject
# kernel calls by an old schema.
set -uo pipefail
if diff -u "$1" "$2"; then
  echo "operator_schemas.txt is up to date"
  exit 0
fi
echo
echo "core/engine/portable/operator_schemas.txt is stale (the pinned torch/ExecuTorch or an"
echo "own kernel's schema changed). Update it from the checkout:"
echo "  ./bazelw build //core/engine/portable:operator_schemas_regenerated &&"
echo "  cp bazel-bin/core/engine/portable/operator_schemas.regenerated.txt \\"
echo "     core/engine/portable/operator_schemas.txt"
exit 1
