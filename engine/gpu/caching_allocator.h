// CachingAllocator: device memory for one device's compute stream, cached so that a training
// step allocates from the device only in the first step: a freed block goes back to the cache
// at once and the next Allocate of a similar size takes it, with no synchronisation. That is
// safe because every user of the memory is ordered on the one stream (stream order: work
// enqueued after the reuse runs after the work enqueued before the free). Memory used on
// another stream must be synchronised by its user before it is freed.
//
// Blocks come from the device's stream-ordered pool (CudaApi::MallocAsync on the stream),
// sizes rounded up to kRoundBytes; a cached block serves a request of at least half its size
// (best fit, no splitting). When the device is out of memory, the cache is given back
// (FreeAsync), the stream synchronised (a rare path) and the allocation tried once more;
// RESOURCE_EXHAUSTED names the device, the request and the statistics. Stats are what a job
// reports: bytes in use and their peak, bytes reserved (in use + cached), and how many device
// allocations were made.
//
// Ownership: owns every block it allocated; the destructor gives back the cache and every
// block still handed out (whoever holds one must not use it after). Thread model: thread-safe
// (one mutex; CudaApi calls that allocate or free are made outside it).
#ifndef LOCKSTEP_ENGINE_GPU_CACHING_ALLOCATOR_H_
#define LOCKSTEP_ENGINE_GPU_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/cuda/cuda_api.h"

namespace lockstep::engine::gpu {

struct AllocatorStats {
  uint64_t bytes_in_use = 0;       // handed out (rounded sizes)
  uint64_t peak_bytes_in_use = 0;  // since creation or ResetPeak
  uint64_t bytes_reserved = 0;     // from the device: in use + cached
  int64_t device_allocations = 0;  // MallocAsync calls that succeeded
  int64_t allocations = 0;         // Allocate calls that succeeded
  int64_t cache_hits = 0;          // of those, served from the cache
};

class CachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;

  // `api` must outlive the allocator; `stream` is the stream every user orders on.
  CachingAllocator(CudaApi* api, int device, CudaStream stream)
      : api_(api), device_(device), stream_(stream) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Null for 0 bytes. RESOURCE_EXHAUSTED when the device has no room even after giving the
  // cache back; the CudaApi's error (e.g. a sticky INTERNAL) otherwise.
  absl::StatusOr<void*> Allocate(size_t bytes);
  // Back to the cache, usable at once by later work on the stream. INVALID_ARGUMENT for a
  // pointer this allocator did not hand out (or handed back twice). Null: nothing.
  absl::Status Free(void* p);
  // Gives every cached block back to the device pool (FreeAsync on the stream).
  absl::Status ReleaseCache();

  // Device memory for work on another stream (InputStager's slots, which its copy stream
  // writes): straight from the device (CudaApi::Malloc, outside the stream-ordered cache), but
  // counted in bytes_in_use, its peak and bytes_reserved from allocation to release, as torch's
  // max_memory_allocated counts an input batch, so a job's reported peak includes its input.
  // Not in device_allocations (the cache's). The returned pointer's deleter frees it
  // (cudaFree waits for the device) and uncounts it; it must go before the allocator.
  // RESOURCE_EXHAUSTED naming the device and the statistics when the device has no room.
  absl::StatusOr<std::shared_ptr<char>> AllocateOutside(size_t bytes);

  AllocatorStats Stats() const;
  void ResetPeak();

 private:
  void Count(size_t bytes, bool reserve) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives back the cached blocks, taken out of the cache under the lock by the caller.
  absl::Status FreeBlocks(const std::multimap<size_t, void*>& blocks);

  CudaApi* const api_;
  const int device_;
  const CudaStream stream_;
  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> cached_ ABSL_GUARDED_BY(mu_);        // size -> block
  absl::flat_hash_map<void*, size_t> in_use_ ABSL_GUARDED_BY(mu_);  // block -> size
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_CACHING_ALLOCATOR_H_
