#include "collectives/transport/shm/region_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace lockstep {
namespace collectives {

RegionAllocator::RegionAllocator(void* base, size_t bytes)
    : base_(static_cast<char*>(base)), bytes_(bytes / kAlignment * kAlignment) {
  if (bytes_ > 0) free_[0] = bytes_;
}

void* RegionAllocator::Allocate(size_t bytes) {
  if (bytes > bytes_) return nullptr;  // also keeps the rounding below from overflowing
  const size_t want = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  absl::MutexLock lock(&mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const size_t offset = it->first, left = it->second - want;
    free_.erase(it);
    if (left > 0) free_[offset + want] = left;
    used_[offset] = want;
    return base_ + offset;
  }
  return nullptr;
}

void RegionAllocator::Free(void* p) {
  if (p == nullptr) return;
  absl::MutexLock lock(&mu_);
  auto used =
      static_cast<char*>(p) >= base_ ? used_.find(static_cast<char*>(p) - base_) : used_.end();
  if (used == used_.end()) {
    std::fprintf(stderr, "RegionAllocator::Free: %p was not allocated here (or freed twice)\n", p);
    std::abort();
  }
  size_t offset = used->first, len = used->second;
  used_.erase(used);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + len) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += len;
      return;
    }
  }
  free_[offset] = len;
}

bool RegionAllocator::Contains(const void* p, size_t len) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
  return a >= b && a - b <= bytes_ && len <= bytes_ - (a - b);
}

size_t RegionAllocator::OffsetOf(const void* p) const {
  return static_cast<size_t>(static_cast<const char*>(p) - base_);
}

size_t RegionAllocator::bytes_free() const {
  absl::MutexLock lock(&mu_);
  size_t total = 0;
  for (const auto& [offset, len] : free_) total += len;
  return total;
}

}  // namespace collectives
}  // namespace lockstep
