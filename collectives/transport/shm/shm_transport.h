// ShmTransport: ranks on one host exchange bytes through POSIX shared memory.
//
// Each rank creates one segment holding a header (pid, doorbell, aborted flag) and one
// single-producer/single-consumer byte ring per sender; every rank maps every segment.
// A message is copied once into the receiver's ring and read from there by the receiver:
// reductions read it in place (RecvSpec::sink), so a ring all-reduce step costs one copy.
// Messages start 64-byte aligned in the ring, so no element straddles the ring's end.
//
// Small messages (up to kShmSmallMessageBytes, both ends agree on a message's length and so on
// its path) skip the ring: each pair also has 32 slots of 320 bytes, one per message: a flag
// word (the message's sequence number), written last, then the payload, contiguous. The
// receiver polls only the flag of its next slot, so for up to 56 bytes one cache-line transfer
// brings both the news and the bytes (the ring needs two: its head, then the data), and the
// sender writes the other lines of a longer message while nobody reads them (one flag per
// line let the receiver pull each line as it was written: 256 B cost twice 8 B). Reductions
// read the slot in place. The sender reads the consumer's count of slots only when it has
// used them all.
//
// Waiting: spin briefly, then yield, then sleep on a futex "doorbell" in the waiter's own
// header that producers and consumers ring after every step (wake-ups cost a syscall only
// when the waiter sleeps). While sleeping, a waiter wakes every few milliseconds to check
// Abort(), its deadline, and whether the peer it waits on died (a pidfd held since Connect) or
// aborted: then UNAVAILABLE naming that rank, or the rank whose failure made it abort (the
// header's failed_rank, AbortOnPeerFailure).
//
// Single copy (CMA): a message of at least `cma_threshold_bytes` does not go through the
// ring. The sender puts a 64-byte descriptor there (its buffer's address and length) and
// waits; the receiver copies straight out of the sender's memory with process_vm_readv
// (into its destination, or into an L2-sized bounce buffer that feeds the reduction sink),
// then consumes the descriptor, which is the sender's acknowledgement. That halves the
// memory traffic of a plain copy (all-gather steps, broadcast) and is what Open MPI's
// vader does; it is off by default (measured slower here, see cma_threshold_bytes). Connect()
// probes process_vm_readv on every peer (it needs the same uid and no ptrace restriction;
// containers may forbid it): the group uses CMA only when every rank could read every other (agreed
// through the Store), else every message goes through the rings. A peer dying during a read shows
// as ESRCH: UNAVAILABLE naming it.
//
// Zero copy through the heap (ShmOptions::heap_bytes > 0 on every rank): each segment ends in
// a heap (heap(), a RegionAllocator) that every peer maps. A message of at least
// `direct_threshold_bytes` starts with a 64-byte frame in the ring. When every byte of it lies
// in the sender's heap, the frame says where (its offset, or a table of pieces after the
// frame), and the receiver reduces or copies straight out of the sender's heap, then consumes
// the frame: the sender's acknowledgement, as for CMA, but with no system call and no page
// pinning. A ring all-reduce step then costs one pass (a reduction reads the peer's buffer
// where the peer's backward pass wrote it) instead of a copy into the ring and a pass out of
// it. Otherwise the frame says "inline" and the bytes follow through the ring as usual.
// Segments are reserved with posix_fallocate when made, so a full /dev/shm is a clear error
// (or, for the heap, a warning and no heap: ShmOptions::heap_required) at Connect(), never a
// SIGBUS in the middle of a collective; every rank maps them with MAP_POPULATE, so no call
// takes a page fault on its first pass over a ring or the heap.
//
// Connect() runs four named phases, as NCCL's transports name theirs
// (shm_transport_connect.cc):
//   CanConnect   the options can form a group at all (before anything is made)
//   Setup        create, reserve and map this rank's segment, fill its header, advertise
//                its name through the Store ("<prefix>/shm/<rank>")
//   ConnectPeers map every peer's advertised segment, check its header, watch its process
//   AgreeOnPaths agree on CMA and the heap ("<prefix>/shm_mapped/<rank>"); once every rank
//                has mapped every segment, each unlinks its own, so no segment outlives the
//                group even when a process is killed
// and the destructor the fifth, Free: unmap the peers' segments, unlink this rank's own if
// Connect failed before AgreeOnPaths. The data path (rings, slots, waiting) is in
// shm_transport.cc; single copy (CMA) and the zero-copy heap in shm_single_copy.cc; the
// segment's layout in shm_layout.h, its system calls in shm_segment.h.
// Ownership: owns its mappings. Thread model: see Transport.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/store.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/shm/shm_layout.h"
#include "collectives/transport/shm/shm_peer_watch.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

namespace shm {
class OwnSegment;
}  // namespace shm

struct ShmOptions {
  size_t ring_bytes = 2 << 20;  // per ordered pair of ranks; a multiple of 64
  // Waiting policy; -1 chooses by load (ChooseShmWaitPolicy):
  //  - every rank has a core: spin 256 pauses, then yield up to 2000 times (about a
  //    millisecond). Sleeping sooner costs more than the CPU it saves: once one rank sleeps,
  //    every exchange pays a futex wake and the ranks stay out of step.
  //  - ranks outnumber the cores: yield at once and up to 1000 times, which hands the core
  //    to a rank we may be waiting for.
  //  - the ranks fit but their compute threads (busy_threads_per_rank) do not: sleep at
  //    once. A yield would hand the core to this rank's own compute thread for the rest of
  //    its slice (milliseconds), so an all-reduce overlapped with the backward pass would
  //    progress once per slice; asleep, the peer's wake-up preempts the compute thread when
  //    the communicator's thread has a short slice (AlgorithmOptions::progress_thread_slice).
  // Each choice is measured in bench/transport_tuning.md.
  int spin_iterations = -1;   // pause-spins before yielding
  int yield_iterations = -1;  // sched_yield()s before sleeping on the futex
  // Threads each rank keeps busy (the communicator's own, plus e.g. a trainer's compute
  // threads): "ranks share cores" above means ranks x this > online CPUs.
  int busy_threads_per_rank = 1;
  // Messages of at least this many bytes use single-copy CMA when the whole group can;
  // 0 (the default) keeps every message in the rings: on the 2-core VMs CMA lost at every
  // size, because process_vm_readv pins the sender's pages on every call and that costs more
  // than a second copy through the cache-resident rings (bench/transport_tuning.md). Kept
  // for hosts where a copy is dearer than a syscall (large NUMA boxes); try it there.
  size_t cma_threshold_bytes = 0;
  // Bytes of this rank's segment kept as a zero-copy heap (see above; heap()); 0: none. The
  // group moves messages in place only when every rank has a heap and the same threshold.
  // Exclusive with cma_threshold_bytes.
  size_t heap_bytes = 0;
  // Heap messages of at least this many bytes travel in place; smaller ones go inline.
  // Pulling a peer's buffer that is still in its core's L2 (what small messages are) costs
  // more than a copy through the ring. The measured crossing lies between 512 KiB and 1 MiB
  // messages; 768 KiB, below 1 MiB, because a fused bucket is rarely a power of two (n=4
  // cuts the 100 x 40 KiB bucket into 1,024,000-byte messages). bench/transport_tuning.md.
  size_t direct_threshold_bytes = 768 << 10;
  // When /dev/shm has no room for the heap: false (the default) logs a warning and goes on
  // without one (messages take a copy more); true fails Connect with RESOURCE_EXHAUSTED.
  bool heap_required = false;
};

// How a rank waits for a peer: pause-spins, then sched_yield()s, then the futex.
struct ShmWaitPolicy {
  int spin_iterations;
  int yield_iterations;
};
// The policy ShmOptions' -1 values stand for (see ShmOptions): `ranks` ranks of this host,
// each keeping `busy_threads_per_rank` threads busy, on `cpus` online CPUs.
ShmWaitPolicy ChooseShmWaitPolicy(int ranks, int busy_threads_per_rank, long cpus);

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
  // Records `failed_rank` in this rank's header before raising its aborted flag, so that
  // peers name it (CheckPeer).
  void AbortOnPeerFailure(int failed_rank) override;

  std::shared_ptr<TransportHeap> heap() const override;

  // Whether this group moves large messages with process_vm_readv (see above).
  bool cma_enabled() const { return cma_; }
  // Whether this group reads heap messages in place (see above).
  bool direct_enabled() const { return direct_; }

 private:
  using Header = shm::SegmentHeader;
  using Ring = shm::RingControl;
  using Slot = shm::Slot;
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    const char* heap = nullptr;  // its heap, as mapped here, and the heap's size
    size_t heap_bytes = 0;
  };
  // A framed (heap) message's progress, on either end.
  struct Framed {
    enum class Kind { kUnread, kInline, kDirect } kind = Kind::kUnread;
    uint64_t ack_at = 0;  // direct: the ring position whose consumption acknowledges it
  };

  ShmTransport(int rank, int size, const ShmOptions& options);

  // The connect phases (see above), in the order Connect() runs them.
  static absl::Status CanConnect(const ShmOptions& options);
  absl::Status Setup(const std::string& key_prefix, Store* store);
  absl::Status ConnectPeers(const std::string& key_prefix, Store* store, absl::Time deadline);
  absl::Status AgreeOnPaths(const std::string& key_prefix, Store* store, absl::Time deadline);
  void Free();

  Header* header(int r) const;
  Ring* ring(int owner, int sender) const;
  char* ring_data(int owner, int sender) const;
  Slot* slots(int owner, int sender) const;
  void RingDoorbell(int r) const;
  bool TryPush(const SendSpec& send, PieceCursor* out, size_t* pushed);
  bool TryPop(const RecvSpec& recv, PieceCursor* in, size_t* got);
  // Small messages (<= kShmSmallMessageBytes) go whole through one of the pair's slots
  // instead of the ring: true once the message is sent or received.
  bool TryPushSmall(const SendSpec& send, PieceCursor* out);
  bool TryPopSmall(const RecvSpec& recv, PieceCursor* in);
  // CMA: the sender posts its descriptor, then `*pushed` jumps to the end once acknowledged.
  bool TryPushCma(const SendSpec& send, size_t* pushed, uint64_t* ack_at);
  // CMA: reads the next piece of the message out of the sender's memory.
  absl::StatusOr<bool> TryPopCma(const RecvSpec& recv, PieceCursor* in, size_t* got);
  // One process_vm_readv from `peer`; `*n` bytes read (> 0) or UNAVAILABLE naming it.
  absl::Status ReadPeer(int peer, const iovec* local, int nlocal, const iovec* remote, int nremote,
                        size_t* n);
  // Framed messages (heap): the frame, then the bytes inline or in place.
  bool TryPushFramed(const SendSpec& send, PieceCursor* out, size_t* pushed, Framed* f);
  absl::StatusOr<bool> TryPopFramed(const RecvSpec& recv, PieceCursor* in, size_t* got, Framed* f);
  // Reads the next bytes of a direct message out of the peer's heap (remote_pieces_).
  void ReadDirect(const RecvSpec& recv, PieceCursor* in, size_t* got);
  // Free bytes in the ring to `peer`, re-reading its tail only when the last value seen
  // leaves fewer than `want`.
  size_t RingFree(int peer, uint64_t head, size_t want);
  void RingWrite(int owner, int sender, uint64_t at, const void* src, size_t n) const;
  void RingRead(int owner, int sender, uint64_t at, void* dst, size_t n) const;
  bool ProbeCma(int peer) const;
  absl::Status CheckPeer(int peer, const char* what) const;

  const int rank_;
  const int size_;
  const ShmOptions options_;
  int spin_ = 0;
  int yield_ = 0;
  const size_t slot_bytes_;
  const size_t heap_offset_;  // where the heap starts in a segment (all ranks alike)
  size_t segment_bytes_;      // this rank's (without the heap when it could not be reserved)
  std::shared_ptr<shm::OwnSegment> own_;  // this rank's segment (mapped); shared with heap buffers
  std::vector<Mapping> segments_;         // segments_[r]: rank r's segment
  std::vector<shm::PeerProcessWatch> peer_processes_;  // [peer]: how its death is seen
  std::vector<uint64_t> seen_tail_;   // [peer]: its ring's tail as last read (<= the real one)
  std::vector<uint64_t> small_sent_;  // [peer]: small messages written to it so far
  std::vector<uint64_t> small_seen_consumed_;  // [peer]: its slots_consumed as last read
  std::vector<uint64_t> small_received_;       // [peer]: small messages read from it so far
  std::string own_name_;
  bool own_unlinked_ = false;
  std::atomic<bool> aborted_{false};
  bool cma_ = false;
  bool direct_ = false;
  std::vector<char> bounce_;                // CMA reads that feed a reduction sink land here
  std::vector<BufferPiece> remote_pieces_;  // CMA: the sender's pieces (scattered message)
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_TRANSPORT_H_
