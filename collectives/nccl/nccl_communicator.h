// NcclCommunicator: the collectives of one group of GPU ranks over NCCL, with the calls and
// the error contract of collectives::Communicator (communicator.h) on device buffers: AllReduce,
// Broadcast, AllGather, ReduceScatter, Barrier, every DType (f16 and bf16 included) and
// ReduceOp (kMean is ncclAvg), an absolute deadline per call, Abort().
//
// Life:
//   Create: ExchangeUniqueId through the attempt's store (nccl_bootstrap.h), then a
//           non-blocking ncclCommInitRankConfig, polled until done, the init deadline, or the
//           AbortSignal. -> READY
//   READY:  each call enqueues on the communicator's stream and polls ncclCommGetAsyncError
//           and the stream until done -> READY; the deadline, an NCCL error or the
//           AbortSignal -> ncclCommAbort -> FAILED.
//   FAILED: every later call returns the first error at once (the group must be rebuilt, as
//           with NCCL and the CPU collectives).
// Errors: DEADLINE_EXCEEDED naming the rank, the collective and communication.timeout_ms;
// UNAVAILABLE recording the lost rank (peer_failure.h: FailedRank) after AbortSignal::PeerLost,
// or for NCCL's own errors; ABORTED after Abort(); INVALID_ARGUMENT (before anything is
// enqueued; the communicator stays READY) for a bad root or a null buffer with elements.
// Because a deadline or a peer loss aborts the NCCL communicator, no call ever waits past its
// deadline plus a poll interval, and the survivors of a lost rank fail as soon as the
// coordinator reports it.
//
// Several GPUs of one worker: NcclLocalGroup (nccl_local_group.h) creates one communicator per
// GPU and drives them with group calls.
//
// Owns the NCCL communicator (destroyed, or aborted when failed, with this object); not the
// NcclApi, the stream or the store.
// Thread model: one collective at a time (calls from several threads are serialised); Abort()
// and the AbortSignal from any thread.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/nccl/abort_signal.h"
#include "collectives/nccl/nccl_api.h"
#include "collectives/store.h"
#include "collectives/types.h"
#include "common/clock.h"

namespace lockstep::collectives::nccl {

struct NcclCommunicatorOptions {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;               // the job attempt's rendezvous; not owned
  std::string key = "nccl_id";          // where rank 0 publishes the unique id
  NcclApi* api = nullptr;               // not owned
  DeviceStream stream = nullptr;        // the communicator's dedicated stream; not owned
  int device = -1;                      // its CUDA device (SetDevice before init); -1: current
  Clock* clock = nullptr;               // not owned
  std::shared_ptr<AbortSignal> signal;  // the attempt's; a private one when null
  absl::Time init_deadline;             // the id exchange and init (communication.timeout_ms)
  // How often a waiting call looks at NCCL's state and the signal.
  absl::Duration poll_interval = absl::Microseconds(200);
};

class NcclCommunicator {
 public:
  // INVALID_ARGUMENT for a missing store/api/clock or a rank outside [0, size); otherwise the
  // bootstrap's and init's errors (see above), naming this rank.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(NcclCommunicatorOptions options);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

  absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                         absl::Time deadline);
  absl::Status Broadcast(void* buf, size_t count, DType dtype, int root, absl::Time deadline);
  absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype,
                         absl::Time deadline);
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             absl::Time deadline);
  // An all-reduce of one int32 in device scratch memory.
  absl::Status Barrier(absl::Time deadline);

  // Aborts the NCCL communicator: the running and every later call return ABORTED.
  void Abort();

 private:
  friend class NcclLocalGroup;

  explicit NcclCommunicator(NcclCommunicatorOptions options);
  // INVALID_ARGUMENT for options Create refuses; fills in a private AbortSignal.
  static absl::Status CheckOptions(NcclCommunicatorOptions& options);
  // The non-blocking init in two halves: StartInit calls ncclCommInitRankConfig with the
  // exchanged `id` (inside a group for NcclLocalGroup), FinishInit waits for it to be done.
  absl::Status StartInit(const std::string& id);
  absl::Status FinishInit();
  // Runs `enqueue` (one NCCL call on the stream) and waits for it (Wait), unless failed.
  template <typename F>
  absl::Status Run(const char* what, absl::Time deadline, F&& enqueue);
  // What Run does before it waits: the failure and signal checks, then `enqueue`.
  absl::Status StartLocked(const char* what, const std::function<absl::Status(NcclComm)>& enqueue)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls until the communicator is idle (and, with `stream`, the stream has finished), the
  // deadline passes, NCCL reports an error or the signal fires; aborts in the last three.
  absl::Status Wait(const char* what, absl::Time deadline, bool stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `status` as the communicator's failure and aborts the NCCL communicator.
  absl::Status Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ABORTED after Abort(); else the AbortSignal's notice, or OK.
  absl::Status Signalled(const char* what) const;
  absl::Status CheckBuffers(const char* what, const void* a, const void* b, size_t count) const;

  const NcclCommunicatorOptions options_;
  absl::Mutex mu_;  // one call at a time
  NcclComm comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  void* barrier_scratch_ = nullptr;           // set by Init, before any call
  std::atomic<bool> aborted_{false};          // Abort() of this communicator only
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // first error; sticky
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
