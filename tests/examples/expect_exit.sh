#!/usr/bin/env bash
# usage: expect_exit.sh EXPECTED_EXIT EXPECTED_TEXT [--and EXPECTED_TEXT]... BINARY [ARGS...]
# Runs BINARY ARGS and fails unless it exits with EXPECTED_EXIT and its combined output
# contains every EXPECTED_TEXT (fixed strings). Prints the output either way.
set -u
expected_exit="$1"
expected_texts=("$2")
shift 2
while [[ $# -ge 2 && "$1" == "--and" ]]; do
  expected_texts+=("$2")
  shift 2
done
output="$("$@" 2>&1)"
status=$?
printf '%s\n' "$output"
if [[ "$status" != "$expected_exit" ]]; then
  echo "expect_exit: '$*' exited $status, expected $expected_exit" >&2
  exit 1
fi
for expected_text in "${expected_texts[@]}"; do
  if ! grep -qF -- "$expected_text" <<<"$output"; then
    echo "expect_exit: output does not contain '$expected_text'" >&2
    exit 1
  fi
done
echo "expect_exit: exit $status and every expected text as expected"
