// CheckpointFetch: a job's checkpoint, fetched from a worker that holds it and relayed to a
// client (JobService.FetchCheckpoint), so that `lockstep export JOB` needs no shell on the
// chief and no shared file system (TARGET.md, "Checkpoints without a shared filesystem": every
// worker may hold a copy; the chief's is the one users see).
//
// As in XLA's coordination service, the coordinator never reaches into a worker: it asks one
// through the channel the worker already keeps open to it, and the worker answers with a call
// of its own.
//   client --FetchCheckpoint(job, step)--> coordinator
//     for each worker of the job's last attempt, rank 0 (the chief) first:
//       coordinator --UploadCheckpoint{fetch_id} on its assignment stream--> worker
//       worker --WorkerService.UploadCheckpoint(stream chunks)--> coordinator
//         first message: the file (step, size, path), or why it has none: next worker
//     chunks --(a bounded queue)--> the client's stream, the last one only once checked
//
// Checks, before a byte reaches the client: the upload names a fetch that waits (a random
// 128-bit id), comes from the task that fetch asked, over a connection whose certificate
// identity holds that task (FetchCluster::IdentityOf), and announces at most the job's
// CheckpointBytesBound (checkpoint/checkpoint_bound.h). As the bytes pass: the header (magic,
// CRC, version, length), the payload CRC32C, and the metadata's job and step
// (checkpoint::CheckpointStreamCheck). The chunk that ends the file is held back until all of that
// passed, so a client never receives a whole file that failed a check.
//
// Memory: a fetch holds at most options.queue_chunks chunks in its queue, one held back and
// the one in each handler's hands (the worker's chunks are at most the gRPC message limit,
// 1 MiB from worker/checkpoint_upload.h); never the whole file. At most
// options.max_fetches fetches run at once.
//
// Waits: every one has a deadline. A holder must answer within start_timeout (else the next
// holder is asked); once it streams, neither side may stall longer than stall_timeout; an
// upload that ends without its last chunk (the worker died) fails the fetch at once with
// UNAVAILABLE naming the job and the task.
//
// Ownership: borrows the cluster and the clock. Thread model: thread-safe; Fetch runs on the
// client's handler thread, Upload on the worker's, and they meet on a Transfer under mu_
// (never held across a read or a write of a stream).
#ifndef LOCKSTEP_COORDINATOR_CHECKPOINT_FETCH_H_
#define LOCKSTEP_COORDINATOR_CHECKPOINT_FETCH_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tf_config.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace coordinator {

class JobService;
class Membership;

// What a fetch needs from the rest of the coordinator. JobServiceFetchCluster is the real
// one; tests fake it. Implementations are thread-safe.
class FetchCluster {
 public:
  virtual ~FetchCluster() = default;
  // The job's record (its last attempt's workers, rank order) and spec. NOT_FOUND naming it.
  virtual absl::StatusOr<v1::GetJobResponse> Job(const std::string& id) = 0;
  // Pushes `directive` down `task`'s assignment stream. UNAVAILABLE naming the task and its
  // state when it is not ALIVE.
  virtual absl::Status Send(const TaskRef& task, v1::Assignment directive) = 0;
  // The certificate identity bound to `task` ("" under --insecure, or when unknown).
  virtual std::string IdentityOf(const TaskRef& task) = 0;
};

// The real FetchCluster: JobService::Get, JobService::SendDirective, Membership::IdentityOf.
class JobServiceFetchCluster final : public FetchCluster {
 public:
  JobServiceFetchCluster(JobService* jobs, Membership* membership)
      : jobs_(jobs), membership_(membership) {}
  absl::StatusOr<v1::GetJobResponse> Job(const std::string& id) override;
  absl::Status Send(const TaskRef& task, v1::Assignment directive) override;
  std::string IdentityOf(const TaskRef& task) override;

 private:
  JobService* const jobs_;
  Membership* const membership_;
};

struct CheckpointFetchOptions {
  int queue_chunks = 8;  // chunks a fetch holds between the worker and the client
  int max_fetches = 4;   // at once; more answer RESOURCE_EXHAUSTED
  absl::Duration start_timeout = absl::Seconds(10);  // a holder's first answer
  absl::Duration stall_timeout = absl::Seconds(30);  // no progress on either side
  absl::Duration poll = absl::Milliseconds(200);     // how often a client gone is noticed
};

class CheckpointFetch {
 public:
  CheckpointFetch(FetchCluster* cluster, Clock* clock, CheckpointFetchOptions options = {});

  // The client's side: writes the checkpoint's description, then its chunks, to `write`
  // (false: the client went away; `client_gone` is asked while waiting). Errors as the
  // proto's FetchCheckpoint lists them, each naming the job and the tasks tried.
  absl::Status Fetch(const v1::FetchCheckpointRequest& request,
                     absl::FunctionRef<bool(const v1::CheckpointChunk&)> write,
                     absl::FunctionRef<bool()> client_gone);

  // The worker's side: the messages of one UploadCheckpoint call from `read` (false: the
  // stream ended), sent by the worker whose certificate identity is `identity` ("" under
  // --insecure). Errors as the proto's UploadCheckpoint lists them.
  absl::Status Upload(const std::string& identity,
                      absl::FunctionRef<bool(v1::CheckpointUploadChunk*)> read);

  // Ends every fetch and upload (UNAVAILABLE); later calls answer UNAVAILABLE.
  void Shutdown();

 private:
  // One holder asked for one fetch.
  struct Transfer {
    // kAsked --upload's first message--> kStreaming --last chunk queued--> kDone
    //    |                                   |
    //    +--> kDeclined (none, oversize)     +--> kFailed (worker gone, check failed, stall)
    // Either side may move any unfinished state to kAbandoned (the other gave up).
    enum class State { kAsked, kDeclined, kStreaming, kDone, kFailed, kAbandoned };
    std::string id;
    std::string job_id;
    std::string job_uid;
    TaskRef holder;
    int64_t step = 0;  // wanted; 0: the newest
    int64_t bound = 0;
    State state = State::kAsked;
    absl::Status why;            // kDeclined, kFailed
    v1::CheckpointChunk header;  // kStreaming on: the file's description
    std::deque<v1::CheckpointChunk> queue;
  };

  // Relays `t`'s chunks to the client until the last one, or an error.
  absl::Status Relay(Transfer& t, absl::FunctionRef<bool(const v1::CheckpointChunk&)> write,
                     absl::FunctionRef<bool()> client_gone) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `chunk` for the client, waiting while the queue is full.
  absl::Status Push(Transfer& t, v1::CheckpointChunk chunk) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends `t` in kFailed with `why` (unless it already ended) and returns `why`.
  absl::Status FailLocked(Transfer& t, absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits in slices of options_.poll until `cond` or `deadline`, returning early (false)
  // when `client_gone()`; true when `cond` holds.
  bool WaitLocked(const absl::Condition& cond, absl::Time deadline,
                  absl::FunctionRef<bool()> client_gone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FetchCluster* const cluster_;
  Clock* const clock_;
  const CheckpointFetchOptions options_;

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // fetches
  std::map<std::string, std::shared_ptr<Transfer>> transfers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_CHECKPOINT_FETCH_H_
