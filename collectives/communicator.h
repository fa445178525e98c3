// Communicator: the collectives of one group of ranks (AllReduce, Broadcast, AllGather,
// ReduceScatter, Barrier) over a Transport; Lockstep's own CollectiveCommunicator
// (collective_communicator.h). Build one with CreateCommunicator
// (communicator_factory.h); tests may wrap any Transport with Communicator::Create.
//
// Calls take raw buffers (void* + element count + DType), in place when send == recv, and
// an absolute deadline; they return absl::Status:
//   OK; DEADLINE_EXCEEDED (a peer is slow or stopped); UNAVAILABLE naming the peer that
//   died, closed its connection or aborted, and the rank the failure started at when that
//   peer left because of another (peer_failure.h: every survivor names the same culprit);
//   ABORTED after Abort(); INVALID_ARGUMENT for a bad root, or a null buffer with count > 0
//   (the message names the argument).
// INVALID_ARGUMENT is returned (async: as a finished handle) before the collective starts and,
// as with NCCL, leaves the communicator as it was; the peers' matching call still waits for
// this rank. After any other error the communicator is failed: every later call returns the
// same code at once (the group must be rebuilt, as with NCCL). Except after a deadline, a
// failed rank also closes its transport so that its peers fail fast too.
// Every rank must issue the same collectives in the same order.
//
// Async forms return a CollectiveHandle; the collectives run one at a time, in call order,
// on the communicator's own thread, so a caller (the training executor) overlaps them with
// compute. Buffers must stay valid until Wait() returns. Sync calls run on the caller's
// thread when nothing is queued (no thread hand-off on the latency-critical path).
//
// Deadlines: a collective that has not started by its deadline (queued behind slower ones)
// fails with DEADLINE_EXCEEDED when its turn comes, without running. A sync call queued
// behind async ones returns DEADLINE_EXCEEDED at its deadline: if its collective has not
// started it never will (the rank then skipped a collective, so the communicator is failed,
// as after any deadline); if it has, the call waits for it to end, which is soon, since it
// runs with its deadline passed. Wait() has no deadline of its own: the collective writes
// into the caller's buffers until it ends, and its own deadline bounds the wait.
//
// Thread model: thread-safe; Abort() may be called from any thread and makes the pending
// and every later call return ABORTED within 100 ms. The destructor waits for queued calls
// (each bounded by its deadline; call Abort() first to end them at once).
#ifndef LOCKSTEP_COLLECTIVES_COMMUNICATOR_H_
#define LOCKSTEP_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/collective_communicator.h"
#include "collectives/collective_observer.h"
#include "collectives/transport/transport.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

class Communicator final : public CollectiveCommunicator {
 public:
  // `observer` (optional, borrowed, must outlive the communicator) is told every collective's
  // start and end, every message's bytes by peer and every counted all-reduce
  // (collective_observer.h).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      std::unique_ptr<Transport> transport, const AlgorithmOptions& options,
      CollectiveObserver* observer = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  // The transport's zero-copy heap, or nullptr (transport.h: TransportHeap). Collectives on
  // buffers allocated there move a copy less (shared memory: peers read them in place).
  std::shared_ptr<TransportHeap> heap() const override { return transport_->heap(); }

  absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                         absl::Time deadline) override;
  Handle AllReduceAsync(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                        absl::Time deadline) override;

  // All-reduce, in place, of the vector made of `pieces` end to end (one dtype; each piece a
  // whole number of elements; the same piece sizes on every rank): what FusedAllReduce uses
  // so that a bucket of tensors is reduced where they lie, never packed, through the same
  // dispatch as AllReduce (collectives::AllReducePieces: the same segments and algorithms;
  // scattered messages). `pieces` and the buffers must stay valid until Wait() returns.
  Handle AllReducePiecesAsync(absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                              absl::Time deadline) override;
  // The same, returning when done: on the calling thread when no async collective is queued
  // or running (no hand-off to the communicator's thread and back), else behind them. What
  // FusedAllReduce::Finish runs its last bucket with, since its caller waits anyway.
  absl::Status AllReducePieces(absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                               absl::Time deadline) override;

  // `buf` of `root` is copied to every rank's `buf`.
  absl::Status Broadcast(void* buf, size_t count, DType dtype, int root,
                         absl::Time deadline) override;
  Handle BroadcastAsync(void* buf, size_t count, DType dtype, int root,
                        absl::Time deadline) override;

  // recv (size() * count elements) receives every rank's `send` (count elements), in rank
  // order. In place when send == recv + rank() * count elements.
  absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype,
                         absl::Time deadline) override;

  // send holds size() * count elements; recv (count elements) receives the reduction of
  // every rank's block rank().
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             absl::Time deadline) override;

  absl::Status Barrier(absl::Time deadline) override;

  void Abort() override;

  // Counts the async all-reduces (AllReduceAsync, AllReducePiecesAsync) and AllReducePieces,
  // queueing excluded. The other sync calls are not counted: two clock reads would cost a
  // small shared-memory all-reduce a fifth of its time.
  AllReduceTotals async_all_reduce_totals() const override;

 private:
  using Body = std::function<absl::Status()>;
  struct Op {
    Body body;
    Handle handle;
    absl::Time deadline;          // the collective's own; it does not start after it
    const char* what;             // "all-reduce", ...: for messages
    size_t all_reduce_bytes = 0;  // > 0: counted in async_all_reduce_totals()
    size_t bytes = 0;             // payload per rank, for the observer
  };
  // Adds an all-reduce of `bytes` that ran from `started` until now to the totals.
  void CountAllReduce(size_t bytes, absl::Time started);

  Communicator(std::unique_ptr<Transport> transport, const AlgorithmOptions& options,
               CollectiveObserver* observer);
  // `bytes`: the payload per rank, for the observer (all_reduce_bytes when larger).
  Handle Submit(Body body, absl::Time deadline, const char* what, size_t all_reduce_bytes = 0,
                size_t bytes = 0);
  static Handle Finished(absl::Status status) { return CollectiveHandle::Finished(status); }
  // Runs `body` on this thread when nothing is queued (no allocation, no hand-off), else
  // queues it behind the pending collectives and waits, until `deadline` (RunQueued).
  template <typename F>
  absl::Status RunNow(F&& body, absl::Time deadline, const char* what, size_t bytes = 0);
  absl::Status RunQueued(Body body, absl::Time deadline, const char* what, size_t bytes = 0);
  // ABORTED after Abort(), the first error once failed, else OK.
  absl::Status Usable();
  // Runs a collective's body (reported to the observer as `what` of `bytes`).
  template <typename F>
  absl::Status Execute(const char* what, size_t bytes, F&& body);
  // The communicator is failed: keeps the first cause in failed_ and sets has_failed_.
  void MarkFailedLocked(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  // INVALID_ARGUMENT for a root outside the group or a null `buf` with count > 0.
  absl::Status CheckBroadcast(const void* buf, size_t count, int root) const;
  // The pieces' total bytes, or INVALID_ARGUMENT naming this rank (CheckPieces).
  absl::StatusOr<size_t> PiecesBytes(absl::Span<const BufferPiece> pieces, DType dtype) const;

  const std::unique_ptr<Transport> transport_;
  const AlgorithmOptions options_;
  CollectiveObserver* const observer_;  // may be null
  std::atomic<bool> aborted_{false};
  std::atomic<int64_t> async_all_reduce_bytes_{0};
  std::atomic<int64_t> async_all_reduce_ns_{0};
  std::atomic<int64_t> collectives_run_{0};  // the observer's sequence numbers
  // Scratch for out-of-place reduce-scatter; used only by the collective running now.
  std::vector<char> scratch_;

  // The sync fast path takes no lock (a Mutex lock costs more than a small shm all-reduce
  // here): a caller runs its collective at once when nothing is queued and it wins `busy_`.
  // `queued_` mirrors queue_.size(); the worker claims `busy_` before it pops an op, and a
  // sync caller that finds ops queued after it is done touches mu_ so the worker re-checks.
  std::atomic<bool> busy_{false};  // a collective is running
  std::atomic<int> queued_{0};
  std::atomic<bool> has_failed_{false};  // failed_ is set

  absl::Mutex mu_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // first error; sticky
  std::thread worker_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COMMUNICATOR_H_
