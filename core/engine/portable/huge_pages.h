// Copyright (c) executorch-trt authors.
//
// Transparent huge pages for the memory a nested method's load maps (Linux). XNNPACK packs a
// program's weights into heap memory, which glibc maps in 4 KiB pages unless the system runs
// THP "always" (Debian and most distributions default to "madvise"); a decode step streams
// every packed weight once, so 4 KiB pages cost a TLB miss per page (about 10% of a 135M
// decoder's step on the benchmark machine). Backing that memory with 2 MiB pages is a hint to
// the kernel: contents and addresses do not change, and a kernel that refuses changes nothing.

#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace executorch_trt {

// An address range [begin, end).
struct AddressRange {
  uintptr_t begin;
  uintptr_t end;
};

// Whether the portable engine backs a nested method's new memory with huge pages: yes unless
// the environment variable EXECUTORCH_TRT_HUGE_PAGES is "0" (collapsing costs load time, about
// 0.4-1.3 s per 500 MB of weights on the benchmark machine).
bool HugePagesEnabled();

// The process's anonymous private read-write mappings, sorted (Linux: /proc/self/maps); empty
// on other systems or when the file cannot be read.
std::vector<AddressRange> AnonymousMappings();

// The parts of `after` that no range of `before` covers (both sorted, disjoint).
std::vector<AddressRange> NewRanges(const std::vector<AddressRange>& after,
                                    const std::vector<AddressRange>& before);

// Backs the anonymous memory mapped since `before` (an earlier AnonymousMappings()) with huge
// pages: each whole 2 MiB page of it that is at least 90% resident (memory in use, not a
// reservation) is advised MADV_HUGEPAGE and collapsed (MADV_COLLAPSE, Linux 6.1+). Returns the
// bytes the kernel collapsed; 0 where it does not support or refuses it (not an error).
size_t BackNewMappingsWithHugePages(const std::vector<AddressRange>& before);

}  // namespace executorch_trt
