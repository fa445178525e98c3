// JobExecutor: runs one Partition of a job on this worker, start to finish: rendezvous and
// strategy (job_strategy.h), the input pipeline (job_input.h), the chief's initial
// variables broadcast (in the strategy's scope), the Trainer loop for the job's steps or
// epochs with gradient all-reduce overlapping the backward pass, evaluation every N steps
// and at the end, progress as a JobReport, and on the chief, checkpoints
// and TensorBoard scalars (JobChief).
//
//   CREATED --Run()--> STARTING --strategy, variables, input ready--> TRAINING
//                         |                                             |   |
//                         | error / Abort()                every step   |   | Preempt() here
//                         v                                done, final  |   | or on a peer:
//                   FAILED / ABORTED  <-- error / Abort() -- eval + ckpt |   v checkpoint
//                                                            DONE <----+  PREEMPTED
//
// Multi-worker start-up: every worker sets "ready/<rank>" in the store and waits for the
// others' before the strategy connects its transports (whose accept loops only end at
// their deadline), so an abort while peers are missing is honoured by the store.
// An attempt after the first (a restart) restores the newest checkpoint some worker holds
// whole once the variables exist, and resumes the steps and the input after it
// (job_restore.h); every worker keeps its own copy of each checkpoint (JobChief).
// Abort(reason) (AbortJob, the agent dropping jobs) aborts the rendezvous store and the
// strategy's collectives, so Run() returns within a step or a store poll slice (< 2 s),
// with phase ABORTED. A collective failure (a peer lost) ends Run() with FAILED and the
// collectives' error (which names the peer rank) prefixed by job, attempt and rank. Every
// wait is bounded: rendezvous by `rendezvous_timeout`, collectives by the spec's
// communication.timeout_ms.
//
// The evaluator (Partition.is_evaluator) runs job_evaluator.h's loop instead, STARTING until
// it joined the chief's link, TRAINING while it evaluates, DONE after the final checkpoint;
// the chief of a job with an evaluator hands each checkpoint to a CheckpointSender.
//
// Preemption: Preempt(reason) asks the whole group to stop. The request rides in the next
// step's loss all-reduce (Trainer::Step's request_stop), so every worker learns it after the
// same step, writes its copy of that step's checkpoint and returns PREEMPTED; the job then
// restarts from that checkpoint without losing a step (and without counting a restart).
// A preemption that comes after the last step is a plain DONE.
//
// Diagnostics: a FlightRecorder follows the cross-worker group's collectives and the
// training phases (input, compute, all-reduce, apply, checkpoint, evaluate), and a JobLog
// keeps the attempt's log lines (state changes, progress every summary window, errors);
// diagnostics() is what the agent's heartbeats carry. TestHooks (test_hooks.h) stall or slow
// the loop for the tests of the hang verdict.
//
// Ownership: borrows the client and clock (must outlive it); owns the store, strategy,
// trainer and writers, all released when Run() returns. Thread model: Run() on one thread
// (once); Abort() and report() from any thread.
//
// Files, by responsibility: job_executor.cc (the lifecycle: Create, the states and the
// report, Abort / PeerLost / Preempt, Run, the rendezvous), job_executor_start.cc (the
// session one run trains with: strategy, trainer, restore, input, writers) and
// job_executor_train.cc (the step loop and its summary, evaluation and checkpoint cadences).
#ifndef LOCKSTEP_WORKER_JOB_EXECUTOR_H_
#define LOCKSTEP_WORKER_JOB_EXECUTOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/collective_observer.h"
#include "collectives/types.h"
#include "common/clock.h"
#include "distribute/distributed_dataset.h"
#include "distribute/nccl_all_reduce.h"
#include "distribute/strategy.h"
#include "distribute/trainer.h"
#include "engine/executor.h"
#include "engine/graph.h"
#include "lockstep/v1/assignment.pb.h"
#include "worker/coordinator_store.h"
#include "worker/eval_link.h"
#include "worker/file_roots.h"
#include "worker/flight_recorder.h"
#include "worker/job_chief.h"
#include "worker/job_device_memory.h"
#include "worker/job_input.h"
#include "worker/job_log.h"
#include "worker/job_restore.h"
#include "worker/test_hooks.h"
#include "worker/worker_metrics.h"
#include "worker/worker_service_client.h"

namespace lockstep {
namespace worker {

struct JobExecutorOptions {
  WorkerServiceClient* client = nullptr;  // rendezvous key-value store; not owned
  Clock* clock = nullptr;                 // null: the real clock
  distribute::LocalDevices devices;
  // NCCL for GPU jobs (lockstepd loads it at start in a CUDA build on a GPU host).
  distribute::NcclEnvironment nccl;
  collectives::TransportKind transport = collectives::TransportKind::kTcp;
  std::string listen_host = "127.0.0.1";
  // The data plane's TCP listen port (`lockstepd --data_port`); 0: an ephemeral one. A flat
  // MultiWorkerMirrored job also uses the next port per local replica.
  int data_port = 0;
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // This worker's state directory (`lockstepd --state_dir`): its copies of the checkpoints
  // of the jobs it runs, which a restart restores from (job_restore.h). Empty: no copies.
  std::string state_dir;
  // Other jobs whose copies under state_dir are kept when a job starts, the most recently
  // written (`lockstepd --retained_checkpoint_copies`, checkpoint_copies.h).
  int retained_checkpoint_copies = 2;
  // The directories the job may read data from and write outputs under (`lockstepd
  // --data_root/--output_root`): Create resolves every path of the spec through them and
  // refuses the partition naming the field otherwise. Null: paths are used as given
  // (in-process tests and benchmarks).
  std::shared_ptr<const FileRoots> file_roots;
  // All-reduce each gradient while the backward pass goes on (the default); false: after it.
  bool overlap_all_reduce = true;
  // GPU replicas' batches staged on their devices by the input pipeline's prefetch thread
  // (distribute::DistributeOptions::prefetch_to_device); false: copied in by each step.
  bool prefetch_to_device = true;
  // lockstepd's metrics (steps, their phases, checkpoints, the collectives); optional, must
  // outlive the executor.
  WorkerMetrics* metrics = nullptr;
  // Benchmarks: called on Run()'s thread after every completed step. Leave empty otherwise.
  std::function<void(int64_t step, const distribute::TrainStepResult& result)> on_step;
  // Faults for tests (LOCKSTEP_TEST_HOOKS); empty otherwise.
  TestHooks test_hooks;
};

class JobExecutor {
 public:
  enum class State { kCreated, kStarting, kTraining, kDone, kFailed, kAborted, kPreempted };
  static const char* StateName(State s);

  // INVALID_ARGUMENT naming the field for a partition that cannot run at all (no job id, no
  // rendezvous prefix, a path outside options.file_roots). The spec itself is validated
  // once, by the coordinator.
  static absl::StatusOr<std::unique_ptr<JobExecutor>> Create(v1::Partition partition,
                                                             JobExecutorOptions options);
  ~JobExecutor();

  // Runs the partition to its end; returns the final report (phase DONE, FAILED or
  // ABORTED). FAILED_PRECONDITION in the report if called twice.
  v1::JobReport Run();
  // Stops Run() as soon as possible; idempotent; safe before Run().
  void Abort(const std::string& reason);
  // Abort, because the coordinator lost worker `rank`: the strategy's collectives fail naming
  // it (distribute::Strategy::PeerLost: over NCCL, UNAVAILABLE naming the rank at once).
  void PeerLost(int rank, const std::string& reason);
  // Asks the group to stop after the next step with a checkpoint (see "Preemption"); `reason`
  // goes into the report. Idempotent; before training has started it is an Abort.
  void Preempt(const std::string& reason);

  v1::JobReport report() const;
  // The flight record and the log lines not yet delivered, for a heartbeat.
  v1::JobDiagnostics diagnostics() const;
  // A heartbeat carrying the log lines up to `seq` reached the coordinator.
  void LogDelivered(int64_t seq) { log_.Delivered(seq); }
  State state() const;
  const v1::Partition& partition() const { return partition_; }

 private:
  // Abort and PeerLost: `lost_rank` set for a peer loss.
  void AbortFor(const std::string& reason, std::optional<int> lost_rank);
  // What one run trains with, built once by StartSession: the graph (which the trainer and
  // the evaluator borrow, so the session is not moved), the strategy, the trainer (restored
  // for a restart), the input, the evaluator and the chief's writers.
  struct Session {
    engine::Graph graph;
    std::unique_ptr<distribute::Strategy> strategy;
    std::unique_ptr<distribute::Trainer> trainer;
    Restored restored;
    std::unique_ptr<distribute::DistributedDataset> dataset;
    std::unique_ptr<engine::Executor> evaluator;
    std::unique_ptr<JobChief> chief;
    TrainEpoch epoch;
    // The chief of a job with an evaluator: sends it every checkpoint (eval_link.h).
    std::unique_ptr<CheckpointSender> eval_sender;
    // The GPU replicas' device memory since the strategy was made (none for a CPU job).
    JobDeviceMemory device_memory;
  };

  JobExecutor(v1::Partition partition, JobExecutorOptions options);
  // Input, rendezvous, session, training; OK when every step ran or the group stopped for a
  // preemption (stopped_after_).
  absl::Status RunLoop();
  // Every worker of the attempt has joined (an abortable barrier in the store).
  absl::Status Rendezvous();
  // Fills `session`: the strategy (published for Abort(); the caller unpublishes it before
  // the session is destroyed), variables, restore, input pipeline and writers
  // (job_executor_start.cc).
  absl::Status StartSession(const JobInput& input, Session* session);
  // The training loop: steps, summaries (one MetricsWindow feeds the report and the chief's
  // scalars), evaluation, checkpoints, and the stop of a preemption (job_executor_train.cc).
  absl::Status Train(Session& session, const JobInput& input, int64_t total_steps);
  // Registers the strategy for Abort() (null to unregister); ABORTED if already aborted.
  absl::Status Publish(distribute::Strategy* strategy);
  // The same for the chief's checkpoint sender and the evaluator's link.
  absl::Status PublishSender(CheckpointSender* sender);
  absl::Status PublishLink(EvalLink* link);
  // The evaluator task's run (job_evaluator.h).
  absl::Status RunAsEvaluator();
  EvalLinkOptions LinkOptions() const;
  bool aborted() const;
  // Applies `fn` to the shared report under the lock.
  template <typename Fn>
  void UpdateReport(Fn fn) {
    absl::MutexLock l(&mu_);
    fn(report_);
  }
  // Moves to `next` unless already finished; records the error for FAILED/ABORTED.
  void SetState(State next, const std::string& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Who() const;
  // Logs `line` (info) and keeps it in the job's log.
  void Log(const std::string& line);
  // The training loop's phase for the flight recorder, and the test hooks' stall there.
  absl::Status EnterPhase(v1::TrainPhase phase, int64_t step);
  // Waits until Abort() (a test hook's stall); returns ABORTED.
  absl::Status StallUntilAborted(const std::string& where);

  const v1::Partition partition_;
  const JobExecutorOptions options_;
  const std::unique_ptr<Clock> owned_clock_;  // when options.clock is null
  Clock* const clock_;
  const std::unique_ptr<CoordinatorStore> store_;
  FlightRecorder recorder_;
  // The cross-worker group's observers: the recorder and options_.metrics.
  collectives::CollectiveObserverList observers_;
  JobLog log_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kCreated;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  bool abort_requested_ ABSL_GUARDED_BY(mu_) = false;
  // Preempt(): read by the training loop every step without the lock.
  std::atomic<bool> preempt_requested_{false};
  std::string preemption_ ABSL_GUARDED_BY(mu_);
  // Set by RunLoop when the group stopped for a preemption after this step (-1: it did not).
  int64_t stopped_after_ = -1;
  distribute::Strategy* strategy_ ABSL_GUARDED_BY(mu_) = nullptr;  // while Run() holds one
  CheckpointSender* eval_sender_ ABSL_GUARDED_BY(mu_) = nullptr;
  EvalLink* eval_link_ ABSL_GUARDED_BY(mu_) = nullptr;
  v1::JobReport report_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_EXECUTOR_H_
