// Copyright (c) executorch-trt authors.
//
// fuzz_support.h: what the fuzz targets of tests/fuzz share.
#pragma once

#include <cstdint>
#include <vector>

namespace executorch_trt::fuzz {

// Silences ExecuTorch's log (every rejected input logs why, which would dominate the run
// time) unless EXECUTORCH_TRT_FUZZ_LOG is set in the environment, and initialises the
// runtime (executorch::runtime::runtime_init). Call once, from LLVMFuzzerInitialize.
void InitRuntimeForFuzzing();

// If `blob` has a header whose required features include CHECKSUM (docs/formats/delegate_blob.md)
// and whose covered range [metadata_offset, payload_offset + payload_size) lies inside `blob`
// without overflow, stores the BLAKE2b-64 of that range in the checksum field, so a mutated
// metadata or payload byte reaches the parsers behind the check instead of failing it.
// Leaves any other blob unchanged. Never reads outside `blob`.
void ResealChecksum(std::vector<uint8_t>* blob);

// Stops the process with a message on stderr when `condition` is false: an invariant of a
// parser's result that the fuzzer must report as a crash. Never returns when it fails.
void Check(bool condition, const char* what);

}  // namespace executorch_trt::fuzz
