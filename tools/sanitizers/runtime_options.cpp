// Copyright (c) executorch-trt authors.
//
// runtime_options.cpp: default options of the sanitizer runtimes for binaries built with
// --config=asan or --config=tsan (.bazelrc). The runtimes call these functions at start-up;
// an environment variable (ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS) still overrides them.
// The suppressions come from lsan.supp and tsan.supp in this directory.

extern "C" {

// ASan: fail on the first report with a full stack; LeakSanitizer on (the suppressions in
// lsan.supp cover ExecuTorch's process-lifetime allocations only).
const char* __asan_default_options() {
  return "detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=1:"
         "strict_string_checks=1:check_initialization_order=1";
}

// UBSan (built with -fno-sanitize-recover): print the stack of the report.
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// TSan: stop at the first race, with the history of both accesses.
const char* __tsan_default_options() { return "halt_on_error=1:second_deadlock_stack=1"; }

}  // extern "C"
