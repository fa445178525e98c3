#include "engine/gpu/caching_allocator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::engine::gpu {

CachingAllocator::~CachingAllocator() {
  std::multimap<size_t, void*> blocks;
  {
    absl::MutexLock lock(&mu_);
    blocks = std::move(cached_);
    for (const auto& [p, size] : in_use_) blocks.emplace(size, p);
    in_use_.clear();
  }
  FreeBlocks(blocks).IgnoreError();  // a context in error cannot give memory back anyway
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
  {
    absl::MutexLock lock(&mu_);
    // Best fit among blocks no more than twice the size.
    auto it = cached_.lower_bound(size);
    if (it != cached_.end() && it->first <= 2 * size) {
      void* p = it->second;
      in_use_[p] = it->first;
      Count(it->first, /*reserve=*/false);
      ++stats_.allocations;
      ++stats_.cache_hits;
      cached_.erase(it);
      return p;
    }
  }
  absl::StatusOr<void*> p = api_->MallocAsync(size, stream_);
  if (!p.ok() && p.status().code() == absl::StatusCode::kResourceExhausted) {
    std::multimap<size_t, void*> cache;
    {
      absl::MutexLock lock(&mu_);
      cache = std::move(cached_);
      cached_.clear();
    }
    if (!cache.empty()) {  // give the cache back, wait until it is free, try once more
      if (absl::Status s = FreeBlocks(cache); !s.ok()) return s;
      if (absl::Status s = api_->StreamSynchronize(stream_); !s.ok()) return s;
      p = api_->MallocAsync(size, stream_);
    }
  }
  absl::MutexLock lock(&mu_);
  if (!p.ok()) {
    if (p.status().code() != absl::StatusCode::kResourceExhausted) return p.status();
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device_, ": out of memory allocating ", bytes, " bytes (", stats_.bytes_in_use,
        " bytes in use, peak ", stats_.peak_bytes_in_use, ", ", stats_.bytes_reserved,
        " reserved after giving back the cache; a smaller per-replica batch needs less): ",
        p.status().message()));
  }
  in_use_[*p] = size;
  Count(size, /*reserve=*/true);
  ++stats_.device_allocations;
  ++stats_.allocations;
  return *p;
}

void CachingAllocator::Count(size_t bytes, bool reserve) {
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  if (reserve) stats_.bytes_reserved += bytes;
}

absl::StatusOr<std::shared_ptr<char>> CachingAllocator::AllocateOutside(size_t bytes) {
  const size_t size = bytes == 0 ? 1 : bytes;
  absl::StatusOr<void*> p = api_->Malloc(size);
  absl::MutexLock lock(&mu_);
  if (!p.ok()) {
    if (p.status().code() != absl::StatusCode::kResourceExhausted) return p.status();
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device_, ": out of memory allocating ", size, " bytes outside the cache (",
        stats_.bytes_in_use, " bytes in use, peak ", stats_.peak_bytes_in_use, ", ",
        stats_.bytes_reserved, " reserved): ", p.status().message()));
  }
  Count(size, /*reserve=*/true);
  return std::shared_ptr<char>(static_cast<char*>(*p), [this, size](char* q) {
    (void)api_->Free(q);
    absl::MutexLock lock(&mu_);
    stats_.bytes_in_use -= size;
    stats_.bytes_reserved -= size;
  });
}

absl::Status CachingAllocator::Free(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d: CachingAllocator::Free(%p): not a block this allocator handed out (freed "
        "twice?)",
        device_, p));
  }
  stats_.bytes_in_use -= it->second;
  cached_.emplace(it->second, p);
  in_use_.erase(it);
  return absl::OkStatus();
}

absl::Status CachingAllocator::ReleaseCache() {
  std::multimap<size_t, void*> cache;
  {
    absl::MutexLock lock(&mu_);
    cache = std::move(cached_);
    cached_.clear();
  }
  return FreeBlocks(cache);
}

absl::Status CachingAllocator::FreeBlocks(const std::multimap<size_t, void*>& blocks) {
  absl::Status status;
  for (const auto& [size, p] : blocks) {
    absl::Status s = api_->FreeAsync(p, stream_);
    status.Update(s);
    if (s.ok()) {
      absl::MutexLock lock(&mu_);
      stats_.bytes_reserved -= size;
    }
  }
  return status;
}

AllocatorStats CachingAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

}  // namespace lockstep::engine::gpu
