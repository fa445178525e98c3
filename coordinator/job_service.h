// JobService: the coordinator's jobs. It validates and stores submitted jobs (JobStore),
// schedules them onto ALIVE idle training workers, partitions them (partitioner.h), queues
// each worker's Partition / AbortJob for its WatchAssignments stream, turns the JobReports
// that workers send in heartbeats into the job's progress (the chief's figures) and state,
// and feeds WatchJob streams. Pure logic: the gRPC adapters (grpc_*_service.cc) call it, and
// tests drive it with a FakeClock and fake workers.
//
// Life of a job (the stored state machine is drawn in job_store/job_store.h):
//   Submit -> PENDING --Tick/Submit: enough idle ALIVE workers--> RUNNING (attempt+1,
//   partitions queued) --every worker DONE--> SUCCEEDED
//                      --a worker FAILED--> abort pushed to the others; FAILED with that
//                        worker's error once the others ended the attempt, or naming a
//                        task of the job that went LOST meanwhile (a SIGKILLed peer makes
//                        the others fail first), or after the failure grace (at least
//                        heartbeat_timeout + heartbeat_interval, JobServiceOptions)
//                      --a worker LOST / re-registered--> FAILED naming it, abort the others
//                      --Cancel--> CANCELLED, abort pushed to every worker
// Restarts: a failure (either kind above) while restart_policy.max_restarts allows one
// more makes the job RESTARTING instead of FAILED (the reason says what failed and which
// restart this is; every attempt's reason stays in the record's transitions). It is
// queued like a pending job and starts its next attempt (attempt+1, a new secret and
// rendezvous prefix) once every worker left the failed attempt and enough are ALIVE and
// idle; the workers restore the newest checkpoint one of them holds whole
// (worker/job_restore.h). A preemption (a worker's lockstepd got SIGTERM: its group
// stopped after one step with a checkpoint and every worker reports PREEMPTED) makes the
// job RESTARTING without counting a restart.
// Each attempt is a JobAttempt (job_attempt.h: its workers, reports and named transitions);
// the queue of PENDING and RESTARTING jobs and the choice of workers is the Scheduler's
// (scheduler.h).
// Leaving: a job that ended keeps each of its workers busy (no new partition is pushed to
// it) until that worker has left the attempt: it reported its end (DONE, FAILED, ABORTED or
// PREEMPTED: its executor has returned and its collectives are closed), or it is no longer
// ALIVE under the incarnation it was given the job with, or it said nothing about the
// attempt for the failure grace (see JobAttempt::ReleaseLeft for why the bound is silence).
// Workers needed: JobSpec.num_workers, or 1 for ONE_DEVICE / MIRRORED / CENTRAL_STORAGE,
// or (0 with MULTI_WORKER_MIRRORED) every ALIVE training worker (type "worker" or
// "chief"), all of which must be idle; a restart needs as many as the attempt it replaces.
// Queued jobs are scheduled oldest first.
// A coordinator restart: Recover() re-adopts each RUNNING job's stored attempt (its workers
// and their incarnations, JobRecord.attempt_workers): the workers train on without the
// coordinator, register again with their incarnations and report; one that is not back
// within the failure grace is lost as usual. A RUNNING record without a stored attempt
// becomes RESTARTING when its restart policy allows, else FAILED.
//
// A failing store (a full disk, a read-only file system): every write the service makes is
// checked. A job whose start the store does not take stays queued (nothing is pushed to a
// worker) and is tried again after a backoff (0.5 s doubling up to kMaxStoreRetryBackoff);
// a state the service decided (a job ending, restarting, cancelled) that the store does not
// take is retried with the same backoff until it does, and until then GetJob, ListJobs and
// WatchJob show the decided state with the reason "(not yet saved in the job store: ...)"
// and the job is not started again. Each failed write is logged with the job and the
// store's error and counted (StoreWriteFailures, the coordinator's
// lockstep_coordinator_store_write_failures metric).
// A stored record that cannot be read back is a FAILED job (job_store.h).
//
// Limits (JobServiceOptions, coordinator flags): the jobs queued (PENDING and RESTARTING) at
// once, a job's model and batch (JobLimits, jobspec/rules.h), and the open WatchJob and
// WatchAssignments streams (WatchLimits); past one, RESOURCE_EXHAUSTED naming the flag.
// Retention: only the newest `retained_jobs` ended jobs are kept; older ones are deleted
// from the store and from memory (once every worker left their last attempt), so the
// coordinator's memory and its store stay flat however many jobs come and go
// (bench/job_churn measures it). GetJob of a deleted job is NOT_FOUND.
//
// Files (one class, split along its seams): job_service.cc (construction, key access,
// draining, the mailboxes), job_service_submit.cc (submit and queue: lowering, scheduling,
// partitions), job_service_attempts.cc (attempts and reports: Tick, failures, restarts,
// elastic growth, the evaluator), job_service_watch.cc (WatchJob, WatchAssignments),
// job_service_recovery.cc (Recover, unsaved store writes, retention).
//
// Ownership: borrows the JobStore, the Membership and the Clock (they must outlive it).
// Thread model: every method is thread-safe (one mutex; the store and membership have
// their own and never call back). NextAssignment and NextEvent block up to a deadline;
// Shutdown() wakes them.
#ifndef LOCKSTEP_COORDINATOR_JOB_SERVICE_H_
#define LOCKSTEP_COORDINATOR_JOB_SERVICE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/job_attempt.h"
#include "coordinator/job_store/job_store.h"
#include "coordinator/membership.h"
#include "coordinator/partitioner.h"
#include "coordinator/scheduler.h"
#include "coordinator/watch_limits.h"
#include "jobspec/lower.h"
#include "lockstep/v1/coordinator.pb.h"
#include "lockstep/v1/job_plan.pb.h"

namespace lockstep {
namespace coordinator {

// An attempt that fails sooner than this after it started makes the next restart wait
// (doubling from 0.5 s with each such attempt in a row, up to kMaxRestartBackoff).
constexpr absl::Duration kQuickFailure = absl::Seconds(10);
constexpr absl::Duration kMaxRestartBackoff = absl::Seconds(30);
// A worker's report on an attempt that is over is answered with an abort, unless this many
// assignments already wait for it (a worker that reports made-up attempts and never reads
// its stream cannot grow the coordinator's memory).
constexpr size_t kMaxAdvisoryAborts = 64;
// A store write that failed is tried again after 0.5 s, doubling with each failure in a row,
// up to this.
constexpr absl::Duration kMaxStoreRetryBackoff = absl::Seconds(30);

struct JobServiceOptions {
  // After a worker reports FAILED, how long the job waits for its other workers to end
  // the attempt (or for one to be found LOST, which then names the failure). It must
  // outlast failure detection: a SIGKILLed worker's peers report their collective's error
  // at once, while it is found LOST only heartbeat_timeout after its last beat. So the
  // JobService never waits less than its Membership's heartbeat_timeout +
  // heartbeat_interval (the interval covers the sweep that marks it LOST).
  absl::Duration failure_grace = absl::Seconds(5);
  // What one job may ask for (model parameters and bytes, the batch per replica).
  jobspec::JobLimits limits;
  // Jobs queued (PENDING or RESTARTING) at once; Submit answers RESOURCE_EXHAUSTED beyond.
  int max_pending_jobs = 1000;
  // Ended jobs kept (in the store and in memory); older ones are deleted. 0: keep every one.
  int retained_jobs = 1000;
  // Open WatchJob / WatchAssignments streams.
  WatchLimitOptions watches;
  // Called (under the service's lock; it must not call back) with an attempt's rendezvous
  // prefix when the attempt ends: the server deletes its keys and barriers.
  std::function<void(const std::string& prefix)> on_attempt_ended;
};

// The failure grace a JobService uses: options.failure_grace (5 s by default), raised to
// heartbeat_timeout + heartbeat_interval, so that a lost worker is found before it expires.
absl::Duration EffectiveFailureGrace(const JobServiceOptions& options,
                                     const MembershipOptions& membership);

// Partition.job_uid of `record`'s job: "<id>@<created micros>", unique across coordinators
// and state directories; checkpoints carry it.
std::string JobUid(const v1::JobRecord& record);

class JobService {
 public:
  JobService(JobStore* store, Membership* membership, Clock* clock, JobServiceOptions options = {});

  // Jobs the store holds as RUNNING are re-adopted from their stored attempts (see above);
  // PENDING and RESTARTING jobs are queued. Call once, before serving.
  absl::Status Recover();

  // Lowers the spec against the workers ALIVE now (jobspec/lower.h: INVALID_ARGUMENT naming
  // the field; RESOURCE_EXHAUSTED for a model or batch over the limits; the output
  // directories are the workers' to check, not probed here), refuses it when
  // max_pending_jobs are queued (RESOURCE_EXHAUSTED), stores spec and plan (durably, before
  // returning) and schedules the job. Returns its id. Every partition carries the plan.
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec);
  // The job's record, spec, plan (what it was lowered to; for a job stored before plans that
  // has not ended, what it will run with), reports and evaluator. NOT_FOUND naming the id.
  absl::StatusOr<v1::GetJobResponse> Get(const std::string& id);
  absl::StatusOr<std::vector<v1::JobRecord>> List(int limit);
  // NOT_FOUND; FAILED_PRECONDITION when the job already ended.
  absl::StatusOr<v1::JobRecord> Cancel(const std::string& id, const std::string& reason);

  // WatchJob: the job's next event. `*seen` is the caller's cursor (start at 0): the first
  // call answers the current state at once, later ones wait for a change. The caller
  // stops after an event whose job state is terminal. DEADLINE_EXCEEDED when nothing
  // changed by `deadline`; NOT_FOUND; UNAVAILABLE after Shutdown().
  absl::StatusOr<v1::JobEvent> NextEvent(const std::string& id, int64_t* seen, absl::Time deadline);

  // WatchAssignments: the next Partition or AbortJob for `task`. ABORTED when
  // `incarnation` is not the task's registered one (re-register); NOT_FOUND for an
  // unknown task; DEADLINE_EXCEEDED when none came by `deadline`; UNAVAILABLE after
  // Shutdown().
  absl::StatusOr<v1::Assignment> NextAssignment(const TaskRef& task, uint64_t incarnation,
                                                absl::Time deadline);

  // A heartbeat's reports (the caller has already checked the heartbeat with Membership).
  void OnReports(const TaskRef& task, const std::vector<v1::JobReport>& reports);
  // Fails running jobs whose workers are no longer ALIVE under the incarnation they were
  // given the job with (LOST, DEREGISTERED or restarted), settles failures whose grace ran
  // out, and schedules pending jobs. The server calls it periodically (and after every
  // registration and heartbeat with reports).
  void Tick();
  // DrainWorker: marks `task` drained (Membership::SetDraining) and asks the job attempt it
  // runs, if any, to stop after its next step with a checkpoint (a PreemptJob pushed to the
  // worker: the job restarts elsewhere without counting a restart); `undo` makes the task
  // schedulable again. Errors of SetDraining (NOT_FOUND, INVALID_ARGUMENT).
  absl::StatusOr<v1::DrainWorkerResponse> Drain(const TaskRef& task, bool undo);
  // Whether the worker with certificate identity `identity` may read or write the
  // rendezvous key (or barrier) `key`: a key under "jobs/<id>/<attempt>/" belongs to that
  // running attempt, and only its workers may use it (PERMISSION_DENIED naming the key,
  // the job and the attempt otherwise, also for an attempt that is not running); other
  // keys are the workers' common area. An empty identity (--insecure) is not checked.
  absl::Status CheckKeyAccess(const std::string& identity, const std::string& key);
  // Whether `task` is one of the workers (or the evaluator) of attempt `attempt` of job
  // `job_id`, while that attempt runs or its workers are leaving it (the last attempt of a
  // job that ended is kept until they left). What a heartbeat says about other attempts
  // (diagnostics, reports) is not the caller's to say.
  bool RunsAttempt(const TaskRef& task, const std::string& job_id, int attempt);
  // The running job of each busy task, with the step it last reported (for status).
  std::map<TaskRef, std::pair<std::string, int64_t>> RunningTasks();
  // Pushes `directive` (not a job's partition: an UploadCheckpoint) to the ALIVE `task`'s
  // assignment stream (coordinator/checkpoint_fetch.h). UNAVAILABLE naming the task and its
  // state when it is not ALIVE.
  absl::Status SendDirective(const TaskRef& task, v1::Assignment directive);
  // Wakes every NextAssignment / NextEvent (they answer UNAVAILABLE).
  void Shutdown();

  // The open-stream limits the gRPC streams take a slot from (WatchJob, WatchAssignments).
  WatchLimits& watches() { return watches_; }

  // The failure grace in use: EffectiveFailureGrace of the options and the membership's.
  absl::Duration failure_grace() const { return failure_grace_; }

  // Store writes that failed since the service started, and the jobs whose decided state
  // the store has not taken yet (retried on every Tick after their backoff).
  struct StoreHealth {
    int64_t write_failures = 0;
    int unsaved_jobs = 0;
  };
  StoreHealth GetStoreHealth();

 private:
  struct Mailbox {
    uint64_t incarnation = 0;
    std::deque<v1::Assignment> queue;
  };

  // The cluster's facts for LowerJobSpec: the ALIVE training workers of `tasks` and their
  // devices, the heartbeat timeout, the limits.
  jobspec::ClusterFacts FactsOf(const std::vector<v1::TaskStatus>& tasks) const;
  // The plan `record` was stored with, brought to this version (jobspec::UpgradePlan: an
  // older plan's missing sections decided from `spec`); a record from a coordinator from
  // before plans is lowered again (ClusterFacts::check_workers false). INVALID_ARGUMENT
  // naming why a spec no longer lowers; FAILED_PRECONDITION for a plan of a newer
  // coordinator (naming both versions); DATA_LOSS when the stored plan cannot be parsed.
  absl::StatusOr<v1::JobPlan> PlanOf(const v1::JobRecord& record, const v1::JobSpec& spec) const;
  // Starts the queued jobs that can start, oldest first (Scheduler), after letting go of the
  // workers that left ended attempts.
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `record` if enough workers are idle; false if it must wait.
  bool TryStartLocked(const v1::JobRecord& record, const std::vector<v1::TaskStatus>& tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A failure of the running job `id`: RESTARTING (queued for its next attempt on as many
  // workers) when its restart policy has restarts left, else FAILED.
  void FailLocked(const std::string& id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the running attempt of `id` in `state` (FAILED, SUCCEEDED, CANCELLED or
  // RESTARTING), pushing an abort to every worker that has not ended the attempt (unless
  // SUCCEEDED); the attempt moves to ended_ while its workers leave it.
  void EndLocked(const std::string& id, v1::JobState state, const std::string& reason,
                 bool counts_as_restart = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes an AbortJob of `job`'s attempt to each of `workers`.
  void AbortLocked(const JobAttempt& job, const std::vector<AttemptWorker>& workers,
                   const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushLocked(const TaskRef& task, uint64_t incarnation, v1::Assignment a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the attempt after `job` needs: `workers`, and for an elastic job (its plan's
  // restart.min_workers) fewer after the plan's replacement timeout.
  WorkerNeed RestartNeedLocked(const JobAttempt& job, int workers) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic jobs running on fewer than their most workers while training workers are idle:
  // asks the group to stop after its next step with a checkpoint (a PreemptJob to its chief)
  // so that the next attempt runs on more (JobAttempt::ResizeTo).
  void GrowLocked(const std::vector<v1::TaskStatus>& tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settles `id` after a report or a tick: what JobAttempt::Settle decides.
  void SettleLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChangedLocked(const std::string& id, std::string message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs an attempt, or has not left one that ended.
  bool IsBusyLocked(const TaskRef& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t VersionLocked(const std::string& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `id` to `state` in the store; when the store does not take it, remembers it in
  // unsaved_ (shown by Get/List/NextEvent, retried by SaveUnsavedLocked).
  void SaveStateLocked(const std::string& id, v1::JobState state, const std::string& reason,
                       bool counts_as_restart = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retries the unsaved states whose backoff ran out.
  void SaveUnsavedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `record` as the service decided it: an unsaved state replaces the stored one.
  void OverlayUnsavedLocked(v1::JobRecord& record) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts and logs a failed store write about `id`; returns the backoff for the
  // `failures`-th failure in a row.
  absl::Duration StoreWriteFailedLocked(const std::string& id, absl::string_view what,
                                        const absl::Status& error, int failures)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the ended jobs beyond retained_jobs (store and memory), skipping any whose
  // workers have not all left its last attempt (a later call takes it).
  void RetireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  Membership* const membership_;
  Clock* const clock_;
  const absl::Duration failure_grace_;  // EffectiveFailureGrace
  const std::function<void(const std::string&)> on_attempt_ended_;
  const jobspec::JobLimits limits_;
  const int max_pending_jobs_;
  const int retained_jobs_;
  WatchLimits watches_;

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // The running attempt of each job that runs.
  std::map<std::string, JobAttempt> active_ ABSL_GUARDED_BY(mu_);
  std::map<TaskRef, Mailbox> mailboxes_ ABSL_GUARDED_BY(mu_);
  // PENDING and RESTARTING jobs, oldest first.
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  // The last attempt of each job that ended (or is between two attempts): its workers'
  // reports keep arriving until each left it (busy until then), and GetJob shows them (so
  // "every worker stopped" can be observed).
  std::map<std::string, JobAttempt> ended_ ABSL_GUARDED_BY(mu_);
  // Attempts re-adopted after a coordinator restart: until when their workers may take to
  // register again before they count as lost.
  std::map<std::string, absl::Time> adopted_until_ ABSL_GUARDED_BY(mu_);
  // Per job: attempts in a row that failed within kQuickFailure of their start.
  std::map<std::string, int> quick_failures_ ABSL_GUARDED_BY(mu_);
  // Per job: a version bumped on every change (WatchJob cursors) and the latest message.
  int64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::pair<int64_t, std::string>> changes_ ABSL_GUARDED_BY(mu_);

  // A job's evaluator (JobSpec.evaluator): TF_CONFIG's evaluator task, a side-car of the
  // attempt outside its group. Its reports never decide the job; it is busy until it
  // reported the attempt's end, was aborted with a job that did not succeed and left, or is
  // no longer ALIVE under its incarnation.
  struct Evaluator {
    TaskRef task;
    uint64_t incarnation = 0;
    int attempt = 0;
    v1::JobReport report;
    bool ended = false;
  };
  std::map<std::string, Evaluator> evaluators_ ABSL_GUARDED_BY(mu_);
  // An ALIVE, idle evaluator task, if any.
  const v1::TaskStatus* ChooseEvaluatorLocked(const std::vector<v1::TaskStatus>& tasks) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `r` when it is from the evaluator of its job's attempt; false otherwise.
  bool OnEvaluatorReportLocked(const TaskRef& task, const v1::JobReport& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the record of evaluators that are gone (not ALIVE under their incarnation).
  void ReleaseEvaluatorsLocked(const std::map<TaskRef, const v1::TaskStatus*>& by_ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job ended since the last RetireLocked (or one was skipped): retire on the next Tick.
  bool retire_due_ ABSL_GUARDED_BY(mu_) = false;

  // A write the store has not taken: the job's decided state, or its start.
  struct StoreRetry {
    int failures = 0;                                // in a row
    absl::Time next_try;                             // after the backoff
    std::string error;                               // the store's last error
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;  // unsaved_ only
    std::string reason;
    bool counts_as_restart = true;
  };
  // Jobs whose decided state the store has not taken.
  std::map<std::string, StoreRetry> unsaved_ ABSL_GUARDED_BY(mu_);
  // Queued jobs whose start the store did not take: not tried again before next_try.
  std::map<std::string, StoreRetry> start_retries_ ABSL_GUARDED_BY(mu_);
  int64_t store_write_failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_SERVICE_H_
