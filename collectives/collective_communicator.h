// CollectiveCommunicator: the one interface through which everything above collectives/
// (FusedAllReduce, the strategies' cross-device ops, the hierarchical reducer, the eval link)
// runs the collectives of one group of ranks, whatever moves the bytes:
//   Communicator      (communicator.h)              Lockstep's own collectives over a
//                                                   Transport (TCP, shared memory, in-process)
//   NcclCommunicator  (nccl/nccl_communicator.h)    NCCL, on device buffers
// Only factories name a concrete class (CreateCommunicator, the strategies' builders).
//
// Calls take raw buffers (void* + element count + DType), in place when send == recv, and an
// absolute deadline. The error contract is shared: OK; DEADLINE_EXCEEDED naming the rank and
// the collective; UNAVAILABLE naming the lost peer (peer_failure.h: FailedRank); ABORTED
// after Abort(); INVALID_ARGUMENT for a bad root or a null buffer with elements (before
// anything starts; the communicator stays usable). After any other error the communicator is
// failed: every later call returns the first error at once (the group must be rebuilt).
// Every rank must issue the same collectives in the same order.
//
// Async forms return a CollectiveHandle; an implementation runs its collectives one at a
// time in call order (sync calls after the async ones queued before them), off the caller's
// thread, so that a trainer overlaps them with compute. Buffers must stay valid until Wait()
// returns.
//
// Thread model: implementations are thread-safe; Abort() may be called from any thread.
#ifndef LOCKSTEP_COLLECTIVES_COLLECTIVE_COMMUNICATOR_H_
#define LOCKSTEP_COLLECTIVES_COLLECTIVE_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectives/transport/transport.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

// The result of an async collective. The implementation that runs it calls Finish once;
// callers Wait. Thread model: thread-safe.
class CollectiveHandle {
 public:
  // A handle already finished with `status` (an argument refused before queueing).
  static std::shared_ptr<CollectiveHandle> Finished(absl::Status status);

  // Blocks until the collective finished (bounded by its deadline, those of the collectives
  // queued before it, and by Abort()).
  absl::Status Wait();
  bool Done();
  // True once finished; false when `deadline` passes first.
  bool WaitUntil(absl::Time deadline);
  // Called once by the implementation running the collective.
  void Finish(absl::Status status);

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};
using Handle = std::shared_ptr<CollectiveHandle>;

class CollectiveCommunicator {
 public:
  virtual ~CollectiveCommunicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A heap whose buffers the collectives move with a copy less (transport.h: TransportHeap),
  // or nullptr (the default; NCCL reads device memory in place anyway).
  virtual std::shared_ptr<TransportHeap> heap() const { return nullptr; }

  virtual absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op, absl::Time deadline) = 0;
  virtual Handle AllReduceAsync(const void* send, void* recv, size_t count, DType dtype,
                                ReduceOp op, absl::Time deadline) = 0;
  // All-reduce, in place, of the vector made of `pieces` end to end (one dtype; each piece a
  // whole number of elements; the same piece sizes on every rank): what FusedAllReduce
  // reduces a bucket of tensors with, where they lie. `pieces` and the buffers must stay
  // valid until Wait() returns.
  virtual Handle AllReducePiecesAsync(absl::Span<const BufferPiece> pieces, DType dtype,
                                      ReduceOp op, absl::Time deadline) = 0;
  virtual absl::Status AllReducePieces(absl::Span<const BufferPiece> pieces, DType dtype,
                                       ReduceOp op, absl::Time deadline) = 0;

  // `buf` of `root` is copied to every rank's `buf`.
  virtual absl::Status Broadcast(void* buf, size_t count, DType dtype, int root,
                                 absl::Time deadline) = 0;
  virtual Handle BroadcastAsync(void* buf, size_t count, DType dtype, int root,
                                absl::Time deadline) = 0;
  // recv (size() * count elements) receives every rank's `send` (count elements), in rank
  // order.
  virtual absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype,
                                 absl::Time deadline) = 0;
  // send holds size() * count elements; recv (count elements) receives the reduction of
  // every rank's block rank().
  virtual absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op, absl::Time deadline) = 0;
  virtual absl::Status Barrier(absl::Time deadline) = 0;

  // The pending and every later call return ABORTED (within 100 ms).
  virtual void Abort() = 0;

  // What a trainer's gradient packs have moved so far: the async all-reduces and
  // AllReducePieces; payload bytes per rank and the time they ran, successful ones only.
  // For bus bandwidth: busbw = bytes * 2(n-1)/n / time.
  struct AllReduceTotals {
    int64_t bytes = 0;
    absl::Duration time;
  };
  virtual AllReduceTotals async_all_reduce_totals() const = 0;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COLLECTIVE_COMMUNICATOR_H_
