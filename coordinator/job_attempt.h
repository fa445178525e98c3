// JobAttempt: one attempt of a job on a fixed group of workers (ranks 0..N-1, each with the
// incarnation it was given the attempt under), their latest reports, and how the attempt
// ends. Named transitions, as the coordinator's job service drives them:
//
//            OnReport(FAILED) / Fail()
//   RUNNING ---------------------------> FAILING   (failure known; the others are aborted
//      |                                    |       and have until fail_at to leave)
//      | Outcome(): every worker DONE       | Outcome(): every worker ended it, or
//      |   -> kSucceeded; every worker       |   fail_at passed -> kFailed
//      |   ended it, one PREEMPTED           |
//      |   -> kPreempted                     |
//      v                End()                v
//   ENDED (the job's record moved on) <------+
//      each worker stays busy ("leaving") until it reported its end, is no longer ALIVE
//      under its incarnation, or said nothing of the attempt for the grace (ReleaseLeft).
//
// Everything collective (the rendezvous prefix, the secret) belongs to one attempt and dies
// with it. Pure bookkeeping: no locks, no I/O; the JobService holds it under its mutex.
#ifndef LOCKSTEP_COORDINATOR_JOB_ATTEMPT_H_
#define LOCKSTEP_COORDINATOR_JOB_ATTEMPT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/membership.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job_plan.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace coordinator {

// A report that ends the attempt for its worker: DONE, FAILED, ABORTED or PREEMPTED.
bool EndsAttempt(v1::JobReport::Phase phase);
// A failure that a worker saw in a peer (its collective names "peer rank N" or a peer that
// "left the group"), not one of its own.
bool IsRelayedFailure(absl::string_view failure);

// A worker of the attempt as the coordinator gave it: its task and incarnation.
struct AttemptWorker {
  TaskRef task;
  uint64_t incarnation = 0;
};

class JobAttempt {
 public:
  enum class State { kRunning, kFailing, kEnded };
  // What the workers' reports say of the attempt.
  enum class Outcome { kUndecided, kSucceeded, kFailed, kPreempted };

  // `spec` as submitted and `plan`, what it was lowered to (restarts, elastic counts and
  // devices are read from the plan).
  JobAttempt(std::string job_id, int attempt, v1::JobSpec spec, v1::JobPlan plan,
             std::vector<AttemptWorker> workers, absl::Time started = absl::InfinitePast());

  // ---- Transitions ----
  // A report of one of its workers while RUNNING or FAILING. The chief's is the job's
  // progress. A FAILED report moves RUNNING to FAILING (Fail with the worker's error, giving
  // the others until now + grace); while FAILING, a worker's own error replaces a relayed
  // one (IsRelayedFailure) as the reason, which keeps the relayed one as "first seen by"; a
  // PREEMPTED one records the preemption. Returns true when this report made the attempt
  // FAILING (the caller aborts the other workers). Reports of tasks not in the attempt are
  // ignored (-1 rank).
  bool OnReport(const TaskRef& task, const v1::JobReport& report, absl::Time now,
                absl::Duration grace);
  // RUNNING -> FAILING with `reason`; the attempt fails at `fail_at` at the latest. A second
  // failure keeps the first reason.
  void Fail(std::string reason, absl::Time fail_at);
  // RUNNING or FAILING -> ENDED: every worker that has not reported its end is leaving until
  // now + grace (see ReleaseLeft).
  void End(absl::Time now, absl::Duration grace);
  // ENDED: a report of one of its workers. An end report lets it go; any other keeps it
  // busy for another grace (it still holds the attempt's threads and ports).
  void OnLeavingReport(const TaskRef& task, const v1::JobReport& report, absl::Time now,
                       absl::Duration grace);
  // ENDED: lets go of every leaving worker no longer ALIVE under its incarnation in
  // `tasks` (LOST, deregistered, restarted, gone), or silent past its grace.
  void ReleaseLeft(const std::map<TaskRef, const v1::TaskStatus*>& tasks, absl::Time now);

  // RUNNING: the attempt is stopping to grow to `workers` (an elastic job, idle workers
  // appeared); the next attempt gets that many.
  void ResizeTo(int workers) { resize_to_ = workers; }

  // ---- Queries ----
  // From the reports (RUNNING or FAILING only): see the drawing.
  Outcome Settle(absl::Time now) const;
  // A worker that has not ended the attempt but is no longer ALIVE under its incarnation in
  // `tasks`: "worker/1 (rank 1) was lost: ..." (what to check included), its rank in
  // `*lost_rank` when given; "" when none.
  std::string FindLostWorker(const std::map<TaskRef, const v1::TaskStatus*>& tasks,
                             absl::Duration heartbeat_timeout, int* lost_rank = nullptr) const;
  // The attempt ends because worker `rank` was lost: its aborts say so (AbortJob.lost).
  void MarkLost(int rank) { lost_rank_ = rank; }
  std::optional<int> lost_rank() const { return lost_rank_; }
  // The workers that have not reported the attempt's end, but `except`.
  std::vector<AttemptWorker> Unended(const TaskRef& except = TaskRef{}) const;
  // RUNNING or FAILING: one of its workers; ENDED: still leaving.
  bool Holds(const TaskRef& task) const;
  // ENDED and no worker is still leaving.
  bool AllLeft() const { return state_ == State::kEnded && leaving_.empty(); }
  // Rank of `task` in the attempt, -1 when it is not one of its workers.
  int RankOf(const TaskRef& task) const;

  const std::string& job_id() const { return job_id_; }
  int attempt() const { return attempt_; }
  const v1::JobSpec& spec() const { return spec_; }
  const v1::JobPlan& plan() const { return plan_; }
  State state() const { return state_; }
  const std::vector<AttemptWorker>& workers() const { return workers_; }
  int size() const { return static_cast<int>(workers_.size()); }
  // The latest report of each worker that sent one, in rank order.
  std::vector<v1::JobReport> Reports() const;
  // The latest report of rank `rank`, or null.
  const v1::JobReport* ReportOf(int rank) const;
  const std::string& failure() const { return failure_; }
  const std::string& preemption() const { return preemption_; }
  int resize_to() const { return resize_to_; }
  absl::Time started() const { return started_; }

 private:
  std::string job_id_;
  int attempt_;
  v1::JobSpec spec_;
  v1::JobPlan plan_;
  std::vector<AttemptWorker> workers_;  // rank order
  absl::Time started_;
  State state_ = State::kRunning;
  std::map<int, v1::JobReport> reports_;  // by rank
  std::string failure_;                   // FAILING: why
  absl::Time fail_at_ = absl::InfiniteFuture();
  std::string preemption_;        // a PREEMPTED report: who and why
  int resize_to_ = 0;             // ResizeTo
  std::optional<int> lost_rank_;  // MarkLost
  // ENDED: the workers still leaving, each with the time it is let go unless it reports the
  // attempt again.
  std::map<TaskRef, absl::Time> leaving_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_ATTEMPT_H_
