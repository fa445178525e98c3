// One rank's shared-memory segment, from its creation to its unmapping, and the mapping of a
// peer's: the system calls behind ShmTransport's setup and connect phases (shm_layout.h says
// what a segment holds).
//
// A segment is created with O_EXCL under a name no other local user can guess, and every
// page is reserved when it is made (posix_fallocate), so a full /dev/shm is a clear error at
// setup, never a SIGBUS in the middle of a collective. Both ends map with MAP_POPULATE, so no
// collective takes a page fault on its first pass over a ring or the heap. A peer's segment is
// mapped only at the size it really has.
//
// Ownership: OwnSegment owns its mapping (unmapped when the transport and every heap buffer
// that came from it are gone); the functions return raw mappings the caller unmaps.
// Thread model: the functions are stateless; OwnSegment's heap is used by one thread at a time.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_SEGMENT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "collectives/transport/shm/region_allocator.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {
namespace shm {

// "/lockstep-<hash of key_prefix>-r<rank>-p<pid>-<64 random bits>": a name no other local user
// can guess, so none can create it first (O_EXCL) to keep the group from forming.
std::string NewSegmentName(const std::string& key_prefix, int rank);

// Creates segment `name` (O_EXCL, mode 0600), reserves `bytes` of /dev/shm for it and maps it.
// UNAVAILABLE when it cannot be created; RESOURCE_EXHAUSTED naming `rank`, the size and
// /dev/shm's free space when the reservation fails (the name is then unlinked), or when mmap
// fails.
absl::StatusOr<void*> CreateSegment(const std::string& name, size_t bytes, int rank);

// Maps a peer's segment `name`, advertised as `bytes` long. UNAVAILABLE when it cannot be
// opened; FAILED_PRECONDITION when it does not hold exactly `bytes` (a length from another
// process is never trusted to map past the segment's end); RESOURCE_EXHAUSTED when mmap fails.
absl::StatusOr<void*> MapPeerSegment(const std::string& name, size_t bytes);

// The inode of this process's PID namespace (0: unknown). Ranks compare it before they judge
// a peer by its pid: in another PID namespace the number names another process, or none.
uint64_t PidNamespace();

// This rank's mapped segment, and the zero-copy heap at its end (empty when the segment has
// none): unmapped when the last owner (the transport, a heap buffer) lets go.
class OwnSegment final : public TransportHeap {
 public:
  OwnSegment(void* base, size_t bytes, size_t heap_offset, size_t heap_bytes);
  ~OwnSegment() override;
  OwnSegment(const OwnSegment&) = delete;
  OwnSegment& operator=(const OwnSegment&) = delete;

  void* Allocate(size_t bytes) override { return heap_.Allocate(bytes); }
  void Free(void* p) override { heap_.Free(p); }
  const RegionAllocator& heap() const { return heap_; }

 private:
  void* const base_;
  const size_t bytes_;
  RegionAllocator heap_;
};

}  // namespace shm
}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_SEGMENT_H_
