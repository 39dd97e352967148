// Copyright (c) executorch-trt authors.

#include "core/engine/portable/huge_pages.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace executorch_trt {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// Larger ranges are address-space reservations (a sanitizer's allocator), not weights.
constexpr uintptr_t kMostBytesExamined = uintptr_t{64} << 30;

#if defined(__linux__)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older headers lack it, older kernels return EINVAL
#endif

// Whether at least 90% of the 4 KiB pages of [begin, begin + kHugePage) are resident.
bool MostlyResident(uintptr_t begin, size_t page, std::vector<unsigned char>* residency) {
  residency->resize(kHugePage / page);
  if (mincore(reinterpret_cast<void*>(begin), kHugePage, residency->data()) != 0) {
    return false;
  }
  size_t resident = std::count_if(residency->begin(), residency->end(),
                                  [](unsigned char r) { return (r & 1) != 0; });
  return resident * 10 >= residency->size() * 9;
}

size_t Collapse(uintptr_t begin, uintptr_t end) {
  void* address = reinterpret_cast<void*>(begin);
  size_t length = end - begin;
  madvise(address, length, MADV_HUGEPAGE);  // keeps khugepaged from splitting them again
  return madvise(address, length, MADV_COLLAPSE) == 0 ? length : 0;
}
#endif

}  // namespace

bool HugePagesEnabled() {
  const char* setting = std::getenv("EXECUTORCH_TRT_HUGE_PAGES");
  return setting == nullptr || std::strcmp(setting, "0") != 0;
}

std::vector<AddressRange> AnonymousMappings() {
  std::vector<AddressRange> ranges;
#if defined(__linux__)
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) {
    return ranges;
  }
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    char perms[5] = {};
    unsigned long long inode = 0;
    int path_at = 0;
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*x %*s %llu %n", &begin, &end, perms,
                    &inode, &path_at) < 4) {
      continue;
    }
    const char* path = line + path_at;
    bool anonymous = *path == '\0' || *path == '\n' || std::strncmp(path, "[heap]", 6) == 0;
    if (inode == 0 && anonymous && perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p') {
      ranges.push_back({begin, end});
    }
  }
  std::fclose(maps);
#endif
  return ranges;
}

std::vector<AddressRange> NewRanges(const std::vector<AddressRange>& after,
                                    const std::vector<AddressRange>& before) {
  std::vector<AddressRange> fresh;
  size_t first = 0;  // the first range of `before` that may overlap the current one
  for (const AddressRange& range : after) {
    while (first < before.size() && before[first].end <= range.begin) {
      ++first;
    }
    uintptr_t at = range.begin;
    for (size_t i = first; i < before.size() && before[i].begin < range.end; ++i) {
      if (before[i].begin > at) {
        fresh.push_back({at, before[i].begin});
      }
      at = std::max(at, before[i].end);
    }
    if (at < range.end) {
      fresh.push_back({at, range.end});
    }
  }
  return fresh;
}

size_t BackNewMappingsWithHugePages(const std::vector<AddressRange>& before) {
  size_t collapsed = 0;
#if defined(__linux__)
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || kHugePage % static_cast<uintptr_t>(page) != 0) {
    return 0;
  }
  std::vector<unsigned char> residency;
  const std::vector<AddressRange> after = AnonymousMappings();
  size_t container = 0;  // the mapping that holds `range`: new ranges come in address order
  for (const AddressRange& range : NewRanges(after, before)) {
    while (after[container].end < range.end) {
      ++container;
    }
    const AddressRange& mapping = after[container];
    // The huge pages that hold any new byte and lie inside the mapping: glibc maps each
    // large allocation on its own, at 4 KiB alignment, so the pages at a new range's ends
    // are often partly older memory of the same mapping.
    uintptr_t begin = range.begin & ~(kHugePage - 1);
    if (begin < mapping.begin) {
      begin += kHugePage;
    }
    uintptr_t end = (range.end + kHugePage - 1) & ~(kHugePage - 1);
    if (end > mapping.end) {
      end -= kHugePage;
    }
    if (begin >= end || end - begin > kMostBytesExamined) {
      continue;
    }
    uintptr_t run = begin;  // start of the current run of mostly resident huge pages
    for (uintptr_t at = begin; at < end; at += kHugePage) {
      if (!MostlyResident(at, static_cast<size_t>(page), &residency)) {
        if (run < at) {
          collapsed += Collapse(run, at);
        }
        run = at + kHugePage;
      }
    }
    if (run < end) {
      collapsed += Collapse(run, end);
    }
  }
#else
  (void)before;
#endif
  return collapsed;
}

}  // namespace executorch_trt
