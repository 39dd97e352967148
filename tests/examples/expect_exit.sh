#!/usr/bin/env bash
# usage: expect_exit.sh EXPECTED_EXIT EXPECTED_TEXT BINARY [ARGS...]
# Runs BINARY ARGS and fails unless it exits with EXPECTED_EXIT and its combined output
# contains EXPECTED_TEXT (a fixed string). Prints the output either way.
set -u
expected_exit="$1"
expected_text="$2"
shift 2
output="$("$@" 2>&1)"
status=$?
printf '%s\n' "$output"
if [[ "$status" != "$expected_exit" ]]; then
  echo "expect_exit: '$*' exited $status, expected $expected_exit" >&2
  exit 1
fi
if ! grep -qF -- "$expected_text" <<<"$output"; then
  echo "expect_exit: output does not contain '$expected_text'" >&2
  exit 1
fi
echo "expect_exit: exit $status and '$expected_text' as expected"
