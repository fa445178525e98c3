// JobService, attempts and reports: the JobReports workers send in heartbeats, settling an
// attempt (JobAttempt::Settle), the periodic Tick (lost workers, failure graces, elastic
// growth), failing, restarting, ending and aborting attempts, and the evaluator side-car's
// reports. Thread model: job_service.h (one mutex).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/incarnation.h"
#include "common/status.h"
#include "coordinator/job_service.h"
#include "coordinator/job_service_internal.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

using job_service_internal::ByRef;
using job_service_internal::NoRestartsLeft;
using job_service_internal::ProgressOf;
using job_service_internal::RestartReason;

void JobService::OnReports(const TaskRef& task, const std::vector<v1::JobReport>& reports) {
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  for (const v1::JobReport& r : reports) {
    if (OnEvaluatorReportLocked(task, r)) continue;
    auto it = active_.find(r.job_id());
    if (it == active_.end() || it->second.attempt() != r.attempt()) {
      if (auto e = ended_.find(r.job_id());
          e != ended_.end() && e->second.attempt() == r.attempt()) {
        e->second.OnLeavingReport(task, r, now, failure_grace_);
      }
      // A report on an attempt that is over: make sure the worker drops it.
      if (!EndsAttempt(r.phase())) {
        v1::Assignment a;
        a.mutable_abort()->set_job_id(r.job_id());
        a.mutable_abort()->set_attempt(r.attempt());
        a.mutable_abort()->set_reason("this attempt of the job is over");
        // Advisory, and named by the worker: at most kMaxAdvisoryAborts wait in its mailbox,
        // so reports of made-up attempts cannot grow it.
        auto box = mailboxes_.find(task);
        if (box != mailboxes_.end() && box->second.queue.size() < kMaxAdvisoryAborts) {
          PushLocked(task, box->second.incarnation, std::move(a));
        }
      }
      continue;
    }
    JobAttempt& job = it->second;
    const int rank = job.RankOf(task);
    if (rank < 0) continue;  // not one of its workers
    if (rank == 0) {
      // The chief's figures are the job's.
      if (store_->UpdateProgress(r.job_id(), ProgressOf(r)).ok()) {
        ChangedLocked(r.job_id(), absl::StrCat("step ", r.step(), "/", r.total_steps()));
      }
    }
    if (job.OnReport(task, r, now, failure_grace_)) {
      AbortLocked(job, job.Unended(task), job.failure());
    }
    SettleLocked(r.job_id());
  }
  ScheduleLocked();
}

void JobService::SettleLocked(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const JobAttempt& job = it->second;
  switch (job.Settle(clock_->Now())) {
    case JobAttempt::Outcome::kUndecided:
      return;
    case JobAttempt::Outcome::kSucceeded: {
      const v1::JobReport& chief = *job.ReportOf(0);
      EndLocked(
          id, v1::SUCCEEDED,
          absl::StrCat("every worker finished: ", chief.step(), " steps, loss ", chief.loss()));
      return;
    }
    case JobAttempt::Outcome::kFailed:
      FailLocked(id, job.failure());
      return;
    case JobAttempt::Outcome::kPreempted: {
      // Not a failure: the next attempt resumes from the step the group stopped after, on
      // as many workers (more when it stopped to grow).
      const WorkerNeed need = RestartNeedLocked(job, std::max(job.size(), job.resize_to()));
      EndLocked(id, v1::RESTARTING,
                absl::StrCat(job.preemption(),
                             "; restarting from it (a preemption: not counted against "
                             "restart_policy.max_restarts)"),
                /*counts_as_restart=*/false);
      scheduler_.Enqueue(id, need);
      return;
    }
  }
}

void JobService::Tick() {
  const std::vector<v1::TaskStatus> tasks = membership_->Snapshot();
  const std::map<TaskRef, const v1::TaskStatus*> by_ref = ByRef(tasks);
  absl::MutexLock l(&mu_);
  struct Lost {
    std::string id;
    std::string reason;
    int rank = 0;
  };
  std::vector<Lost> to_fail;
  std::vector<std::string> to_settle;
  for (const auto& [id, job] : active_) {
    if (auto a = adopted_until_.find(id); a != adopted_until_.end()) {
      if (clock_->Now() < a->second) continue;  // its workers are still coming back
      adopted_until_.erase(a);
    }
    int rank = 0;
    std::string lost = job.FindLostWorker(by_ref, membership_->options().heartbeat_timeout, &rank);
    if (!lost.empty()) {
      if (!job.failure().empty()) absl::StrAppend(&lost, "; before that, ", job.failure());
      to_fail.push_back(Lost{id, std::move(lost), rank});
    } else {
      to_settle.push_back(id);  // a failure whose grace ran out
    }
  }
  for (const Lost& l : to_fail) {
    active_.at(l.id).MarkLost(l.rank);  // the survivors' aborts name it
    FailLocked(l.id, l.reason);
  }
  for (const std::string& id : to_settle) SettleLocked(id);
  ReleaseEvaluatorsLocked(by_ref);
  SaveUnsavedLocked();
  ScheduleLocked();
  GrowLocked(tasks);
  RetireLocked();
}

void JobService::FailLocked(const std::string& id, const std::string& reason) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const int max_restarts = it->second.plan().restart().max_restarts();
  absl::StatusOr<v1::JobRecord> record = store_->Get(id);
  if (record.ok() && record->restarts() < max_restarts) {
    WorkerNeed need = RestartNeedLocked(it->second, it->second.size());
    // Attempts that fail soon after they start (a full disk, a bad file) back off, so that
    // the restarts are not all spent in a second: 0.5 s, 1 s, 2 s, ... up to 30 s.
    int& quick = quick_failures_[id];
    quick = clock_->Now() - it->second.started() < kQuickFailure ? quick + 1 : 0;
    if (quick > 0) {
      const absl::Duration backoff =
          std::min(kMaxRestartBackoff, absl::Milliseconds(500) * (1 << std::min(quick - 1, 6)));
      need.not_before = clock_->Now() + backoff;
      need.shrink_after = std::max(need.shrink_after, need.not_before);
    }
    EndLocked(
        id, v1::RESTARTING,
        absl::StrCat(RestartReason(reason, *record, max_restarts),
                     quick > 0 ? absl::StrCat("; backing off ",
                                              absl::FormatDuration(need.not_before - clock_->Now()),
                                              ": the attempt failed within ",
                                              absl::FormatDuration(kQuickFailure), " of its start")
                               : ""));
    // Queued like a pending job; it starts once its workers left the attempt.
    scheduler_.Enqueue(id, need);
    return;
  }
  EndLocked(
      id, v1::FAILED,
      absl::StrCat(reason, NoRestartsLeft(record.ok() ? record->restarts() : 0, max_restarts)));
}

WorkerNeed JobService::RestartNeedLocked(const JobAttempt& job, int workers) const {
  WorkerNeed need;
  need.workers = workers;
  const v1::RestartPlan& restart = job.plan().restart();
  if (restart.min_workers() > 0) {
    need.min_workers = restart.min_workers();
    need.shrink_after = clock_->Now() + absl::Milliseconds(restart.replacement_timeout_ms());
  }
  return need;
}

void JobService::GrowLocked(const std::vector<v1::TaskStatus>& tasks) {
  const Schedulable workers = SchedulableWorkers(
      tasks, [this](const TaskRef& t) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsBusyLocked(t); });
  int idle = static_cast<int>(workers.idle.size());
  const int alive = static_cast<int>(workers.alive.size());
  if (idle == 0) return;
  for (auto& [id, job] : active_) {
    const v1::RestartPlan& restart = job.plan().restart();
    if (restart.min_workers() <= 0 || job.resize_to() > 0 ||
        job.state() != JobAttempt::State::kRunning) {
      continue;
    }
    // The plan's most (0: every ALIVE training worker), as far as idle workers allow.
    const int most =
        std::min(restart.max_workers() > 0 ? restart.max_workers() : alive, job.size() + idle);
    // Replicas per worker as the plan puts them on the chief; a count is usable when they
    // divide the global batch.
    int per_worker = 1;
    for (const v1::TaskStatus& t : tasks) {
      if (RefOf(t) == job.workers()[0].task) per_worker = ReplicasOn(t, job.plan().devices());
    }
    int target = 0;
    for (int c = most; c > job.size(); --c) {
      if (job.spec().global_batch_size() % (static_cast<int64_t>(c) * per_worker) == 0) {
        target = c;
        break;
      }
    }
    if (target == 0) continue;
    job.ResizeTo(target);
    v1::Assignment a;
    a.mutable_preempt()->set_job_id(id);
    a.mutable_preempt()->set_attempt(job.attempt());
    a.mutable_preempt()->set_reason(
        absl::StrCat("growing from ", job.size(), " to ", target, " workers: idle workers joined"));
    PushLocked(job.workers()[0].task, job.workers()[0].incarnation, std::move(a));
    ChangedLocked(id, absl::StrCat("growing from ", job.size(), " to ", target, " workers"));
    idle -= target - job.size();
    if (idle <= 0) return;
  }
}

void JobService::EndLocked(const std::string& id, v1::JobState state, const std::string& reason,
                           bool counts_as_restart) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  JobAttempt& job = it->second;
  if (state != v1::SUCCEEDED) {
    AbortLocked(job, job.Unended(), reason);
    // The evaluator evaluates a succeeded job's final checkpoint; any other end stops it.
    if (auto e = evaluators_.find(id);
        e != evaluators_.end() && !e->second.ended && e->second.attempt == job.attempt()) {
      AbortLocked(job, {AttemptWorker{e->second.task, e->second.incarnation}}, reason);
    }
  }
  SaveStateLocked(id, state, reason, counts_as_restart);
  job.End(clock_->Now(), failure_grace_);
  // Everything collective of the attempt dies with it.
  if (on_attempt_ended_) on_attempt_ended_(RendezvousPrefix(id, job.attempt()) + "/");
  ended_.insert_or_assign(id, std::move(job));
  active_.erase(it);
  ChangedLocked(id, absl::StrCat(v1::JobState_Name(state), ": ", reason));
  if (IsTerminalJobState(state)) retire_due_ = true;
}

void JobService::AbortLocked(const JobAttempt& job, const std::vector<AttemptWorker>& workers,
                             const std::string& reason) {
  for (const AttemptWorker& w : workers) {
    v1::Assignment a;
    a.mutable_abort()->set_job_id(job.job_id());
    a.mutable_abort()->set_attempt(job.attempt());
    a.mutable_abort()->set_reason(reason);
    if (job.lost_rank().has_value()) {
      a.mutable_abort()->mutable_lost()->set_worker_rank(*job.lost_rank());
    }
    PushLocked(w.task, w.incarnation, std::move(a));
  }
}

bool JobService::OnEvaluatorReportLocked(const TaskRef& task, const v1::JobReport& r) {
  auto e = evaluators_.find(r.job_id());
  if (e == evaluators_.end() || e->second.task != task || e->second.attempt != r.attempt()) {
    return false;
  }
  Evaluator& evaluator = e->second;
  if (evaluator.ended) return true;
  const bool evaluated = r.checkpoints_evaluated() > evaluator.report.checkpoints_evaluated();
  evaluator.report = r;
  if (EndsAttempt(r.phase())) {
    evaluator.ended = true;
    ChangedLocked(r.job_id(), absl::StrCat("evaluator ", task.ToString(), ": ",
                                           v1::JobReport::Phase_Name(r.phase()),
                                           r.error().empty() ? "" : absl::StrCat(": ", r.error())));
  } else if (evaluated) {
    ChangedLocked(r.job_id(), absl::StrCat("evaluator ", task.ToString(), ": step ", r.step(),
                                           ", eval accuracy ", r.eval_accuracy()));
  }
  return true;
}

void JobService::ReleaseEvaluatorsLocked(const std::map<TaskRef, const v1::TaskStatus*>& by_ref) {
  for (auto& [id, e] : evaluators_) {
    if (e.ended) continue;
    if (auto a = adopted_until_.find(id); a != adopted_until_.end() && clock_->Now() < a->second) {
      continue;  // re-adopted after a coordinator restart: still coming back
    }
    auto t = by_ref.find(e.task);
    if (t == by_ref.end() || t->second->state() != v1::ALIVE ||
        t->second->incarnation() != e.incarnation) {
      e.ended = true;
      e.report.set_phase(v1::JobReport::FAILED);
      e.report.set_error(absl::StrCat("evaluator ", e.task.ToString(), " was lost"));
      ChangedLocked(id, e.report.error());
    }
  }
}

}  // namespace coordinator
}  // namespace lockstep
