// RegionAllocator: hands out 64-byte-aligned blocks of one fixed region of memory (the heap
// of a shared-memory segment, see ShmTransport), first fit, freed blocks merged with their
// free neighbours. Meant for long-lived buffers (a training executor's pool allocates once
// and reuses), so it favours simplicity over speed: an ordered map of free runs.
// Ownership: does not own the region. Thread model: thread-safe.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_REGION_ALLOCATOR_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_REGION_ALLOCATOR_H_

#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockstep {
namespace collectives {

class RegionAllocator {
 public:
  static constexpr size_t kAlignment = 64;

  // `base` must be kAlignment-aligned; a trailing partial block of the region is not used.
  RegionAllocator(void* base, size_t bytes);
  RegionAllocator(const RegionAllocator&) = delete;
  RegionAllocator& operator=(const RegionAllocator&) = delete;

  // A block of at least `bytes` (0 counts as 1), or nullptr when no free run is that large.
  void* Allocate(size_t bytes);
  // Returns a block from Allocate; nullptr is ignored. A pointer this allocator did not hand
  // out (or one freed twice) is a programming error and aborts the process.
  void Free(void* p);

  // Whether [p, p + len) lies inside the region.
  bool Contains(const void* p, size_t len) const;
  // Byte offset of `p` (inside the region) from its start.
  size_t OffsetOf(const void* p) const;
  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  size_t bytes_free() const;

 private:
  char* const base_;
  const size_t bytes_;
  mutable absl::Mutex mu_;
  std::map<size_t, size_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> length, no two adjacent
  std::map<size_t, size_t> used_ ABSL_GUARDED_BY(mu_);  // offset -> length
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_REGION_ALLOCATOR_H_
