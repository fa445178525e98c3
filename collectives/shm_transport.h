// ShmTransport: ranks on one host exchange bytes through POSIX shared memory.
//
// Each rank creates one segment holding a header (pid, doorbell, aborted flag) and one
// single-producer/single-consumer byte ring per sender; every rank maps every segment.
// A message is copied once into the receiver's ring and read from there by the receiver:
// reductions read it in place (RecvSpec::sink), so a ring all-reduce step costs one copy.
// Messages start 64-byte aligned in the ring, so no element straddles the ring's end.
//
// Waiting: spin briefly, then yield, then sleep on a futex "doorbell" in the waiter's own
// header that producers and consumers ring after every step (wake-ups cost a syscall only
// when the waiter sleeps). While sleeping, a waiter wakes every few milliseconds to check
// Abort(), its deadline, and whether the peer it waits on died (/proc/<pid>/stat) or
// aborted: then UNAVAILABLE naming that rank.
//
// Connect(): segment names go through the Store ("<prefix>/shm/<rank>"); once every rank has
// mapped every segment ("<prefix>/shm_mapped/<rank>"), each rank unlinks its own, so no
// segment outlives the group even when a process is killed.
// Ownership: owns its mappings. Thread model: see Transport.
#ifndef LOCKSTEP_COLLECTIVES_SHM_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_SHM_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/store.h"
#include "collectives/transport.h"

namespace lockstep {
namespace collectives {

struct ShmOptions {
  size_t ring_bytes = 2 << 20;  // per ordered pair of ranks; a multiple of 64
  // Waiting policy; -1 chooses by load: with no more ranks than online CPUs, spin 256
  // pauses then yield 64 times; with more (ranks share cores), yield at once and up to 1000
  // times, which hands the core to the rank we wait for (measured: n=4 on 2 cores, 8 B,
  // 21 us with spinning, 5.3 us yielding).
  int spin_iterations = -1;   // pause-spins before yielding
  int yield_iterations = -1;  // sched_yield()s before sleeping on the futex
};

class ShmTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<ShmTransport>> Connect(int rank, int world_size,
                                                               const std::string& key_prefix,
                                                               Store* store,
                                                               const ShmOptions& options,
                                                               absl::Time deadline);
  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override;
  void Abort() override;

 private:
  struct Header;
  struct Ring;
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };

  ShmTransport(int rank, int size, const ShmOptions& options);
  Header* header(int r) const;
  Ring* ring(int owner, int sender) const;
  char* ring_data(int owner, int sender) const;
  void RingDoorbell(int r) const;
  bool TryPush(const SendSpec& send, size_t* pushed);
  bool TryPop(const RecvSpec& recv, size_t* got);
  absl::Status CheckPeer(int peer, const char* what) const;

  const int rank_;
  const int size_;
  const ShmOptions options_;
  int spin_ = 0;
  int yield_ = 0;
  const size_t slot_bytes_;
  const size_t segment_bytes_;
  std::vector<Mapping> segments_;  // segments_[r]: rank r's segment
  std::string own_name_;
  bool own_unlinked_ = false;
  std::atomic<bool> aborted_{false};
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_SHM_TRANSPORT_H_
