// EvalLink: how checkpoints travel from a job's chief to its evaluator (TF_CONFIG's
// evaluator task, JobSpec.evaluator) with no shared file system: a two-rank collective
// group, the chief rank 0 and the evaluator rank 1, joined through the attempt's rendezvous
// store under "eval/" with the attempt's secret (shared memory on one host, TCP with the
// HMAC handshake between hosts, as any collective group). A checkpoint is one authenticated
// broadcast from the chief (collectives/blob_broadcast.h) of its encoded bytes
// (checkpoint::CheckpointManager::Encode), keyed from the attempt's secret, numbered, and bounded
// by what the job's model can encode to (CheckpointBytesBound); an end marker says that no
// more will come. The evaluator refuses a longer announcement before allocating it, and
// bytes that fail the MAC (DATA_LOSS naming the chief).
//
// CheckpointSender is the chief's side: a thread of its own joins the group and sends the
// queued checkpoints in order, so training never waits for the evaluator (a slow one only
// lengthens the queue; past its bound the oldest unsent is dropped and logged). The bound is
// in bytes (`queue_budget_bytes`), with at least `min_queued` checkpoints always kept: small
// models' checkpoints all reach an evaluator that joined late or evaluates slowly, a large
// model's queue holds only what the budget allows. Its failures are logged and never fail
// the job: the evaluator is a side-car.
//
// Ownership: EvalLink owns its communicator; CheckpointSender owns its store, link and
// thread.
// Thread model: EvalLink from one thread, except Abort() from any; CheckpointSender's
// methods from any thread.
#ifndef LOCKSTEP_WORKER_EVAL_LINK_H_
#define LOCKSTEP_WORKER_EVAL_LINK_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/blob_broadcast.h"
#include "collectives/collective_communicator.h"
#include "collectives/store.h"
#include "collectives/types.h"
#include "lockstep/v1/assignment.pb.h"

namespace lockstep {
namespace worker {

struct EvalLinkOptions {
  collectives::TransportKind transport = collectives::TransportKind::kAuto;
  std::string listen_host = "127.0.0.1";
  absl::Duration connect_timeout = absl::Seconds(60);
  // The longest checkpoint either side accepts; 0: CheckpointBytesBound of the partition's
  // spec (what a job uses; tests of links with no model set it).
  int64_t max_checkpoint_bytes = 0;
};

class EvalLink {
 public:
  // Joins the group as the chief (IsChief(partition)) or the evaluator
  // (IsEvaluator(partition)); INVALID_ARGUMENT for any other partition. Waits for the
  // other side up to options.connect_timeout (or until `store` is aborted).
  static absl::StatusOr<std::unique_ptr<EvalLink>> Connect(const v1::Partition& partition,
                                                           collectives::Store* store,
                                                           const EvalLinkOptions& options);

  // Chief: one checkpoint's bytes; the end marker. RESOURCE_EXHAUSTED for bytes over the
  // bound (the evaluator fails too).
  absl::Status Send(const std::string& bytes, absl::Time deadline);
  absl::Status SendEnd(absl::Time deadline);
  // Evaluator: the next checkpoint's bytes, or nullopt after the end marker.
  // RESOURCE_EXHAUSTED for an announced length over the bound (nothing allocated), DATA_LOSS
  // for bytes that fail authentication, both naming the chief (rank 0).
  absl::StatusOr<std::optional<std::string>> Receive(absl::Time deadline);

  // Ends any wait at once (ABORTED); the link is unusable afterwards.
  void Abort();

 private:
  EvalLink(std::unique_ptr<collectives::CollectiveCommunicator> comm, collectives::BlobOptions blob)
      : comm_(std::move(comm)), blob_(std::move(blob)) {}
  // The options of the next broadcast: blob_ with the next sequence number in the label.
  collectives::BlobOptions NextBlob();

  std::unique_ptr<collectives::CollectiveCommunicator> comm_;
  const collectives::BlobOptions blob_;
  int64_t sequence_ = 0;  // broadcasts so far, end marker included
};

class CheckpointSender {
 public:
  // Starts the thread, which joins the group at once (the evaluator joins when its attempt
  // starts, as the training workers do) through `store`, its own handle on the attempt's
  // rendezvous store (Abort() aborts it, ending a wait for an evaluator that never came).
  // `timeout` bounds each send.
  CheckpointSender(v1::Partition partition, std::unique_ptr<collectives::Store> store,
                   EvalLinkOptions options, absl::Duration timeout, int min_queued = 2,
                   int64_t queue_budget_bytes = int64_t{256} << 20);
  // Aborts and joins.
  ~CheckpointSender();

  // Queues one encoded checkpoint for the evaluator.
  void Enqueue(std::string bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends what is queued, then the end marker, waiting for them until `deadline`. The
  // first error of the link (logged when it happened), if any.
  absl::Status Finish(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the thread's waits at once.
  void Abort() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  const v1::Partition partition_;
  const std::unique_ptr<collectives::Store> store_;
  const EvalLinkOptions options_;
  const absl::Duration timeout_;
  const int min_queued_;
  const int64_t queue_budget_bytes_;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // the thread has nothing more to do
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  EvalLink* link_ ABSL_GUARDED_BY(mu_) = nullptr;  // while connected, for Abort()
  std::thread thread_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_EVAL_LINK_H_
