#!/usr/bin/env bash
# run_fuzzer.sh: how `bazel run //tests/fuzz:<name>` and `bazel test //tests/fuzz:<name>_smoke`
# start a fuzz target (tests/fuzz/defs.bzl passes the first arguments).
#
#   run_fuzzer.sh NAME BINARY SEED... -- [libFuzzer flags] [inputs]
#
# With no input named after `--`, the seeds (files or directories) are copied into a writable
# corpus directory, $EXECUTORCH_TRT_FUZZ_CORPUS or else <tmp>/executorch_trt_fuzz/NAME (tmp:
# $TEST_TMPDIR under bazel test, else $TMPDIR or /tmp), and BINARY runs on it: under
# --config=fuzz libFuzzer fuzzes it (new inputs are added there; crash inputs are written to
# the directory `bazel run` was started from, or to the test's undeclared outputs); in the
# default build the replay driver (replay_main.cpp) runs every corpus input once. With inputs
# named (e.g. a crash file to reproduce), BINARY runs on exactly those.
set -euo pipefail

# Readable sanitizer stacks: Bazel's strict action environment keeps LLVM's bin/ off PATH.
symbolizer=/usr/lib/llvm-19/bin/llvm-symbolizer
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} && -x $symbolizer ]]; then
  export ASAN_SYMBOLIZER_PATH=$symbolizer UBSAN_SYMBOLIZER_PATH=$symbolizer
fi

name=$1
binary=$2
shift 2
seeds=()
while (($#)) && [[ $1 != -- ]]; do
  seeds+=("$1")
  shift
done
(($#)) && shift
flags=("$@")

for arg in "${flags[@]+"${flags[@]}"}"; do
  if [[ $arg != -* ]]; then
    exec "$binary" "${flags[@]}"
  fi
done

corpus=${EXECUTORCH_TRT_FUZZ_CORPUS:-${TEST_TMPDIR:-${TMPDIR:-/tmp}}/executorch_trt_fuzz/$name}
mkdir -p "$corpus"
for seed in "${seeds[@]}"; do
  if [[ -d $seed ]]; then
    find -L "$seed" -type f -exec cp -L {} "$corpus"/ \;
  else
    cp -L "$seed" "$corpus"/
  fi
done
chmod -R u+w "$corpus"
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-${BUILD_WORKING_DIRECTORY:-$PWD}}
echo "run_fuzzer: $name on $corpus ($(find "$corpus" -type f | wc -l) inputs)" >&2
exec "$binary" -artifact_prefix="$artifacts/" "${flags[@]+"${flags[@]}"}" "$corpus"
