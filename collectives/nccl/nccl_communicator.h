// NcclCommunicator: the collectives of one group of GPU ranks over NCCL, a
// CollectiveCommunicator (collective_communicator.h: its calls and error contract) on device
// buffers: AllReduce, Broadcast, AllGather, ReduceScatter, Barrier, every DType (f16 and bf16
// included) and ReduceOp (kMean is ncclAvg), an absolute deadline per call, Abort(). A
// pieces all-reduce (a fused bucket) is one NCCL group of one all-reduce per piece, so NCCL
// fuses them without a packing copy.
//
// Life:
//   Create: ExchangeUniqueId through the attempt's store (nccl_bootstrap.h), then a
//           non-blocking ncclCommInitRankConfig, polled until done, the init deadline, or the
//           AbortSignal. -> READY
//   READY:  each call enqueues on the communicator's stream and waits until
//           ncclCommGetAsyncError and the call's completion say done (Wait below) -> READY; the
//           deadline, an NCCL error, Abort() or the AbortSignal -> ncclCommAbort -> FAILED.
//   FAILED: every later call returns the first error at once (the group must be rebuilt, as
//           with NCCL and the CPU collectives).
// Errors: DEADLINE_EXCEEDED naming the rank, the collective and communication.timeout_ms;
// UNAVAILABLE recording the lost rank (peer_failure.h: FailedRank) after AbortSignal::PeerLost,
// or for NCCL's own errors; ABORTED after Abort(); INVALID_ARGUMENT (before anything is
// enqueued; the communicator stays READY) for a bad root or a null buffer with elements.
// Because a deadline or a peer loss aborts the NCCL communicator, no call ever waits past its
// deadline, and the survivors of a lost rank fail as soon as the coordinator reports it.
//
// Waiting (Wait): NCCL has no blocking form of ncclCommGetAsyncError and a blocking stream
// synchronize could not be interrupted by a deadline or an abort, so a call first polls
// without sleeping (kSpinPolls polls, yielding the core: a small collective returns as soon
// as it is done, with no sleep floor), then sleeps in growing steps (1 us doubling up to
// poll_interval) on a condition that Abort() and the AbortSignal set, so an abort wakes it
// at once and a long collective costs few polls.
//
// A stream of its own (options.cuda set): the communicator enqueues on `stream`, ordered
// against `producer` (the GPU's compute stream, which writes the buffers before a call and
// reads them after) by events only, never a host or device-wide synchronisation:
//   submit (caller's thread)  EventRecord(ready, producer): the producer's work so far, i.e.
//                             the kernels that wrote this call's buffers;
//   run (queue thread)        StreamWaitEvent(stream, ready); the NCCL call(s) on `stream`;
//                             EventRecord(done, stream);
//   Wait                      polls EventQuery(done) (this call's work, not the whole stream);
//   success                   StreamWaitEvent(producer, done): what the producer enqueues
//                             next (the optimizer) reads the reduced buffers.
// So the producer's later kernels (the rest of the backward pass) run while `stream`
// all-reduces a pack. `ready` events come from a small pool (one per call submitted and not
// yet running, reused: no event is made per step once the pool has grown); `done` is one
// event, as one call runs at a time. Without options.cuda, calls enqueue on `stream` and Wait
// polls the whole stream (StreamState), as for a stream the caller orders itself.
//
// Async calls (AllReduceAsync, AllReducePiecesAsync, BroadcastAsync) run in call order on
// the communicator's own thread, started with the first of them; a sync call runs on the
// caller's thread when nothing is queued, else behind the queued ones.
//
// Several GPUs of one worker: NcclLocalGroup (nccl_local_group.h) creates one communicator per
// GPU and drives them with group calls.
//
// Owns the NCCL communicator (destroyed, or aborted when failed, with this object); not the
// NcclApi, the stream or the store.
// Thread model: thread-safe; one collective at a time (calls from several threads are
// serialised); Abort() and the AbortSignal from any thread.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/collective_communicator.h"
#include "collectives/nccl/abort_signal.h"
#include "collectives/nccl/nccl_api.h"
#include "collectives/store.h"
#include "collectives/types.h"
#include "common/clock.h"
#include "common/cuda/cuda_api.h"

namespace lockstep::collectives::nccl {

struct NcclCommunicatorOptions {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;         // the job attempt's rendezvous; not owned
  std::string key = "nccl_id";    // where rank 0 publishes the unique id
  NcclApi* api = nullptr;         // not owned
  DeviceStream stream = nullptr;  // the communicator's dedicated stream; not owned
  // With a stream of its own (see above): the CUDA runtime the events are made with and the
  // stream that produces and consumes the buffers (not owned). Null cuda: no events.
  CudaApi* cuda = nullptr;
  CudaStream producer = nullptr;
  // Tests only: false leaves out the producer -> stream event wait (the mutation the stream
  // tests must catch: the collective then reads buffers the producer has not written yet).
  bool wait_for_producer = true;
  int device = -1;                      // its CUDA device (SetDevice before init); -1: current
  Clock* clock = nullptr;               // not owned
  std::shared_ptr<AbortSignal> signal;  // the attempt's; a private one when null
  absl::Time init_deadline;             // the id exchange and init (communication.timeout_ms)
  // The longest sleep between two looks of a waiting call at NCCL's state (Wait above).
  absl::Duration poll_interval = absl::Microseconds(200);
};

class NcclCommunicator final : public CollectiveCommunicator {
 public:
  // Polls of a waiting call before it starts to sleep.
  static constexpr int kSpinPolls = 64;

  // INVALID_ARGUMENT for a missing store/api/clock or a rank outside [0, size); otherwise the
  // bootstrap's and init's errors (see above), naming this rank.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(NcclCommunicatorOptions options);
  // Waits for the queued async calls (each bounded by its deadline; Abort() first to end them
  // at once).
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

  absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                         absl::Time deadline) override;
  Handle AllReduceAsync(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                        absl::Time deadline) override;
  // INVALID_ARGUMENT when a piece is not a whole number of elements or is null.
  Handle AllReducePiecesAsync(absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                              absl::Time deadline) override;
  absl::Status AllReducePieces(absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                               absl::Time deadline) override;
  absl::Status Broadcast(void* buf, size_t count, DType dtype, int root,
                         absl::Time deadline) override;
  Handle BroadcastAsync(void* buf, size_t count, DType dtype, int root,
                        absl::Time deadline) override;
  absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype,
                         absl::Time deadline) override;
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             absl::Time deadline) override;
  // An all-reduce of one int32 in device scratch memory.
  absl::Status Barrier(absl::Time deadline) override;

  // Aborts the NCCL communicator: the running and every later call return ABORTED.
  void Abort() override;

  // The async all-reduces and AllReducePieces, from enqueue to done.
  AllReduceTotals async_all_reduce_totals() const override;

 private:
  friend class NcclLocalGroup;

  explicit NcclCommunicator(NcclCommunicatorOptions options);
  // INVALID_ARGUMENT for options Create refuses; fills in a private AbortSignal.
  static absl::Status CheckOptions(NcclCommunicatorOptions& options);
  // The non-blocking init in two halves: StartInit calls ncclCommInitRankConfig with the
  // exchanged `id` (inside a group for NcclLocalGroup), FinishInit waits for it to be done.
  absl::Status StartInit(const std::string& id);
  absl::Status FinishInit();
  // Runs `enqueue` (one NCCL call, or a group of them, on the stream) and waits for it
  // (Wait), unless failed.
  // `ready`: the producer's event captured when the call was submitted (Capture); null: Run
  // captures it.
  absl::Status Run(const char* what, absl::Time deadline,
                   const std::function<absl::Status(NcclComm)>& enqueue, CudaEvent ready = nullptr);
  // With options.cuda: an event of the pool recorded on the producer stream (null without
  // cuda); its error when the record fails.
  absl::StatusOr<CudaEvent> Capture();
  // Makes `stream` wait for `ready` and gives the event back to the pool.
  absl::Status AfterProducer(CudaEvent ready);
  // The all-reduce of `pieces`, one NCCL all-reduce per piece in one group.
  absl::Status RunPieces(absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                         absl::Time deadline, CudaEvent ready = nullptr);
  absl::Status CheckPieces(absl::Span<const BufferPiece> pieces, DType dtype) const;

  // The order of calls: `body` runs on this thread when nothing is queued or running, else
  // behind the queued calls (on the queue's thread).
  absl::Status RunInOrder(std::function<absl::Status()> body);
  // Queues `body` for the queue's thread (started on first use); counted in the totals
  // with `all_reduce_bytes` > 0.
  Handle Submit(std::function<absl::Status()> body, size_t all_reduce_bytes);
  void QueueLoop();
  // Wakes a waiting call (Abort(), the AbortSignal).
  void Wake();
  // Sleeps until `until` or a Wake().
  void Doze(absl::Time until);
  // What Run does before it waits: the failure and signal checks, then `enqueue`.
  absl::Status StartLocked(const char* what, const std::function<absl::Status(NcclComm)>& enqueue)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (spin, then growing sleeps that Wake ends) until the communicator is idle (and,
  // with `stream`, the call's done event, or without options.cuda the stream, has finished), the
  // deadline passes, NCCL reports an error, Abort() or the signal fires; aborts the NCCL
  // communicator in the last four.
  absl::Status Wait(const char* what, absl::Time deadline, bool stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Without events: whether everything on the stream has finished (StreamState).
  absl::StatusOr<bool> StreamIdle();
  // Records `status` as the communicator's failure and aborts the NCCL communicator.
  // `what` names the call for the peer-loss cause ("all-reduce").
  absl::Status Fail(absl::Status status, const char* what = "collective")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ABORTED after Abort(); else the AbortSignal's notice, or OK.
  absl::Status Signalled(const char* what) const;
  absl::Status CheckBuffers(const char* what, const void* a, const void* b, size_t count) const;
  // INVALID_ARGUMENT for a root outside the group or a null `buf` with elements.
  absl::Status CheckBroadcast(const void* buf, size_t count, int root) const;

  const NcclCommunicatorOptions options_;
  absl::Mutex mu_;  // one call at a time
  NcclComm comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  void* barrier_scratch_ = nullptr;           // set by Init, before any call
  std::atomic<bool> aborted_{false};          // Abort() of this communicator only
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // first error; sticky
  int listener_ = -1;                         // on options_.signal

  absl::Mutex wake_mu_;  // waiting calls doze on it
  bool woken_ ABSL_GUARDED_BY(wake_mu_) = false;

  CudaEvent done_ ABSL_GUARDED_BY(mu_) = nullptr;  // with options.cuda: the running call's
  absl::Mutex pool_mu_;
  std::vector<CudaEvent> free_events_ ABSL_GUARDED_BY(pool_mu_);  // ready events to reuse
  std::vector<CudaEvent> all_events_ ABSL_GUARDED_BY(pool_mu_);   // destroyed with this

  std::atomic<int64_t> all_reduce_bytes_{0};
  std::atomic<int64_t> all_reduce_ns_{0};

  // The call queue (RunInOrder, Submit).
  struct Queued {
    std::function<absl::Status()> body;
    Handle handle;
    size_t all_reduce_bytes = 0;
  };
  absl::Mutex queue_mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool running_ ABSL_GUARDED_BY(queue_mu_) = false;  // a call runs now
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread queue_thread_;  // started by the first Submit, under queue_mu_
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
