// Copyright (c) executorch-trt authors.

#include "core/engine/portable/huge_pages.h"

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace executorch_trt {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

bool Covered(const std::vector<AddressRange>& ranges, uintptr_t begin, uintptr_t end) {
  for (const AddressRange& r : ranges) {
    if (r.begin <= begin && end <= r.end) {
      return true;
    }
  }
  return false;
}

// An anonymous mapping of `size` bytes starting at a huge-page boundary.
struct AlignedMapping {
  explicit AlignedMapping(size_t size) : size_(size + kHugePage) {
    base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t base = reinterpret_cast<uintptr_t>(base_);
    data = reinterpret_cast<unsigned char*>((base + kHugePage - 1) & ~(kHugePage - 1));
  }
  ~AlignedMapping() { munmap(base_, size_); }
  void* base_;
  size_t size_;
  unsigned char* data;
};

TEST(NewRangesTest, KeepsWhatNoEarlierRangeCovers) {
  std::vector<AddressRange> before = {{100, 200}, {300, 400}};
  std::vector<AddressRange> after = {{50, 450}, {500, 600}};
  std::vector<AddressRange> fresh = NewRanges(after, before);
  ASSERT_EQ(fresh.size(), 4u);
  EXPECT_EQ(fresh[0].begin, 50u);
  EXPECT_EQ(fresh[0].end, 100u);
  EXPECT_EQ(fresh[1].begin, 200u);
  EXPECT_EQ(fresh[1].end, 300u);
  EXPECT_EQ(fresh[2].begin, 400u);
  EXPECT_EQ(fresh[2].end, 450u);
  EXPECT_EQ(fresh[3].begin, 500u);
  EXPECT_EQ(fresh[3].end, 600u);
}

TEST(NewRangesTest, UnchangedAndShrunkMappingsAddNothing) {
  std::vector<AddressRange> before = {{100, 200}, {300, 400}};
  EXPECT_TRUE(NewRanges(before, before).empty());
  EXPECT_TRUE(NewRanges({{120, 180}, {300, 350}}, before).empty());
  // A mapping that grew at one end (a heap): only the growth is new.
  std::vector<AddressRange> grown = NewRanges({{100, 260}}, before);
  ASSERT_EQ(grown.size(), 1u);
  EXPECT_EQ(grown[0].begin, 200u);
  EXPECT_EQ(grown[0].end, 260u);
}

TEST(AnonymousMappingsTest, ListsAFreshMapping) {
  AlignedMapping m(4 * kHugePage);
  uintptr_t begin = reinterpret_cast<uintptr_t>(m.data);
  EXPECT_TRUE(Covered(AnonymousMappings(), begin, begin + 4 * kHugePage));
}

TEST(HugePagesTest, CollapsesNewResidentMemoryAndKeepsItsContents) {
  {
    AlignedMapping probe(kHugePage);
    std::memset(probe.data, 1, kHugePage);
    if (madvise(probe.data, kHugePage, 25 /* MADV_COLLAPSE */) != 0) {
      GTEST_SKIP() << "this kernel does not collapse memory into huge pages now (no "
                      "MADV_COLLAPSE before Linux 6.1, THP disabled, or no free huge pages)";
    }
  }
  std::vector<AddressRange> before = AnonymousMappings();
  AlignedMapping dense(4 * kHugePage);
  for (size_t i = 0; i < 4 * kHugePage; ++i) {
    dense.data[i] = static_cast<unsigned char>(i * 31 + 7);
  }
  // Touched once per huge page: a reservation, not weights; it must stay sparse.
  AlignedMapping sparse(4 * kHugePage);
  for (size_t i = 0; i < 4 * kHugePage; i += kHugePage) {
    sparse.data[i] = 1;
  }
  size_t collapsed = BackNewMappingsWithHugePages(before);
  EXPECT_GE(collapsed, 4 * kHugePage);
  for (size_t i = 0; i < 4 * kHugePage; ++i) {
    ASSERT_EQ(dense.data[i], static_cast<unsigned char>(i * 31 + 7)) << "byte " << i;
  }
  std::vector<unsigned char> residency(4 * kHugePage / 4096);
  ASSERT_EQ(mincore(sparse.data, 4 * kHugePage, residency.data()), 0);
  size_t resident = 0;
  for (unsigned char r : residency) {
    resident += r & 1;
  }
  EXPECT_LT(resident, residency.size() / 2) << "the sparse mapping was filled in";
}

}  // namespace
}  // namespace executorch_trt
