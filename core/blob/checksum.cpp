// Copyright (c) executorch-trt authors.
//
// BLAKE2b (RFC 7693), specialised to an unkeyed 8-byte digest.

#include "core/blob/checksum.h"

#include <cstring>

#include "core/common/little_endian.h"

namespace executorch_trt {
namespace {

constexpr uint64_t kIv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

// SIGMA of RFC 7693 section 2.7: 10 permutations; round r (of 12) uses kSigma[r % 10].
constexpr uint8_t kSigma[10][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
};
constexpr int kRounds = 12;

constexpr size_t kBlockSize = 128;
constexpr uint64_t kDigestSize = 8;

inline uint64_t Rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

inline void G(uint64_t* v, int a, int b, int c, int d, uint64_t x, uint64_t y) {
  v[a] = v[a] + v[b] + x;
  v[d] = Rotr(v[d] ^ v[a], 32);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 24);
  v[a] = v[a] + v[b] + y;
  v[d] = Rotr(v[d] ^ v[a], 16);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 63);
}

// F of RFC 7693 section 3.2. `counter` is the number of message bytes consumed so far
// including this block (the high 64 bits of the 128-bit counter are always 0 here:
// size_t cannot exceed 2^64).
void Compress(uint64_t h[8], const uint8_t block[kBlockSize], uint64_t counter, bool last) {
  uint64_t v[16];
  uint64_t m[16];
  for (int i = 0; i < 8; ++i) {
    v[i] = h[i];
    v[i + 8] = kIv[i];
  }
  v[12] ^= counter;
  if (last) v[14] = ~v[14];
  for (int i = 0; i < 16; ++i) m[i] = ReadU64(block + 8 * i);
  for (int round = 0; round < kRounds; ++round) {
    const uint8_t* s = kSigma[round % 10];
    G(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    G(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    G(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    G(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    G(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    G(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    G(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    G(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (int i = 0; i < 8; ++i) h[i] ^= v[i] ^ v[i + 8];
}

}  // namespace

uint64_t Blake2b64(const void* data, size_t size) {
  uint64_t h[8];
  std::memcpy(h, kIv, sizeof(h));
  // Parameter block: digest length 8, key length 0, fanout 1, depth 1.
  h[0] ^= 0x01010000ULL ^ kDigestSize;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t consumed = 0;
  // Every full block except the last one is compressed as a non-final block.
  while (size - consumed > kBlockSize) {
    consumed += kBlockSize;
    Compress(h, p + consumed - kBlockSize, consumed, /*last=*/false);
  }
  // The final block (possibly empty or partial), zero-padded.
  uint8_t block[kBlockSize] = {};
  const size_t rest = size - consumed;
  if (rest > 0) std::memcpy(block, p + consumed, rest);
  Compress(h, block, consumed + rest, /*last=*/true);
  return h[0];  // the first 8 digest bytes are h[0] in little-endian order
}

}  // namespace executorch_trt
