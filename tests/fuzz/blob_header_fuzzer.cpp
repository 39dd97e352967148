// Copyright (c) executorch-trt authors.
//
// blob_header_fuzzer: BlobHeader::Parse (core/blob/blob_header.h) on arbitrary bytes, as
// given and with the checksum recomputed (so mutated offsets and sizes reach the range checks
// behind the checksum). An accepted header must locate its metadata and payload inside the
// input, after the header, with an aligned payload; the views must then be readable (ASan).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/blob/blob_header.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using executorch_trt::BlobHeader;
using executorch_trt::fuzz::Check;

void ParseAndCheck(const uint8_t* data, size_t size) {
  executorch::runtime::Result<BlobHeader> header = BlobHeader::Parse(data, size);
  if (!header.ok()) return;
  Check(header->header_size >= executorch_trt::kBlobMinHeaderSize, "header_size >= 64");
  Check(header->metadata_offset >= header->header_size, "metadata after the header");
  Check(header->metadata_size <= size && header->metadata_offset <= size - header->metadata_size,
        "metadata inside the blob");
  Check(header->payload_size <= size && header->payload_offset <= size - header->payload_size,
        "payload inside the blob");
  Check(header->payload_offset % executorch_trt::kBlobPayloadAlignment == 0, "payload aligned");
  // Touch both sections through the views init uses: ASan reports any byte outside `data`.
  uint64_t sum = 0;
  for (char c : header->Metadata(data)) sum += static_cast<uint8_t>(c);
  const uint8_t* payload = header->Payload(data);
  for (uint64_t i = 0; i < header->payload_size; ++i) sum += payload[i];
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  executorch_trt::fuzz::InitRuntimeForFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ParseAndCheck(data, size);
  std::vector<uint8_t> resealed(data, data + size);
  executorch_trt::fuzz::ResealChecksum(&resealed);
  ParseAndCheck(resealed.data(), resealed.size());
  return 0;
}
