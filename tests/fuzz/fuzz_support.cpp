// Copyright (c) executorch-trt authors.

#include "tests/fuzz/fuzz_support.h"

#include <cstdio>
#include <cstdlib>

#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/blob/blob_header.h"
#include "core/blob/checksum.h"
#include "core/common/little_endian.h"

namespace executorch_trt::fuzz {
namespace {

void DropLogMessage(et_timestamp_t /*timestamp*/, et_pal_log_level_t /*level*/,
                    const char* /*filename*/, const char* /*function*/, size_t /*line*/,
                    const char* /*message*/, size_t /*length*/) {}

}  // namespace

void InitRuntimeForFuzzing() {
  if (std::getenv("EXECUTORCH_TRT_FUZZ_LOG") == nullptr) {
    executorch::runtime::register_pal(
        executorch::runtime::PalImpl::create(&DropLogMessage, __FILE__));
  }
  executorch::runtime::runtime_init();
}

void ResealChecksum(std::vector<uint8_t>* blob) {
  if (blob->size() < kBlobMinHeaderSize) return;
  const uint8_t* b = blob->data();
  if ((ReadU64(b + kBlobOffsetRequiredFeatures) & kBlobFeatureChecksum) == 0) return;
  const uint64_t begin = ReadU64(b + kBlobOffsetMetadataOffset);
  const uint64_t payload_offset = ReadU64(b + kBlobOffsetPayloadOffset);
  const uint64_t payload_size = ReadU64(b + kBlobOffsetPayloadSize);
  if (payload_offset > UINT64_MAX - payload_size) return;
  const uint64_t end = payload_offset + payload_size;
  if (begin > end || end > blob->size()) return;
  const uint64_t sum = Blake2b64(b + begin, static_cast<size_t>(end - begin));
  for (int i = 0; i < 8; ++i) {
    (*blob)[kBlobOffsetChecksum + i] = static_cast<uint8_t>(sum >> (8 * i));
  }
}

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace executorch_trt::fuzz
