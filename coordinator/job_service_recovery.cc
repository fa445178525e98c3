// JobService, recovery and the store: re-adopting a restarted coordinator's RUNNING attempts
// and queueing its PENDING and RESTARTING jobs (a job stored before plans is lowered now, an
// older plan brought to this version, or the job FAILED naming why), the writes the store did not
// take (kept unsaved, retried with a backoff, shown overlaid), and retiring ended jobs beyond
// retained_jobs. Thread model: job_service.h (one mutex).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/job_service.h"
#include "coordinator/job_service_internal.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

using job_service_internal::NoRestartsLeft;
using job_service_internal::RestartReason;

absl::Status JobService::Recover() {
  LS_ASSIGN_OR_RETURN(std::vector<v1::JobRecord> jobs, store_->List(0));
  absl::MutexLock l(&mu_);
  retire_due_ = true;  // a store kept by a coordinator with a longer retention is trimmed
  const absl::Time now = clock_->Now();
  for (const v1::JobRecord& job : jobs) {
    if (IsTerminalJobState(job.state())) continue;
    // The plan it runs with: as stored, brought to this version, or (stored before plans)
    // lowered now, again at its next start; FAILED naming why when there is none.
    v1::JobSpec spec;
    absl::StatusOr<v1::JobPlan> plan =
        spec.ParseFromString(job.spec()) ? PlanOf(job, spec)
                                         : absl::DataLossError("the stored spec cannot be parsed");
    if (!plan.ok()) {
      const std::string why(plan.status().message());
      SaveStateLocked(job.id(), v1::FAILED, why);
      ChangedLocked(job.id(), absl::StrCat("FAILED: ", why));
      continue;
    }
    if (job.state() == v1::RUNNING && job.attempt_workers_size() > 0) {
      // Its workers train on (the data plane needs no coordinator) and register again with
      // their incarnations; their reports take the attempt on from here. One that does not
      // come back within the failure grace is lost, as any other.
      std::vector<AttemptWorker> workers;
      for (const v1::AttemptWorkerRecord& w : job.attempt_workers()) {
        workers.push_back(AttemptWorker{TaskRef{w.task_type(), w.task_index()}, w.incarnation()});
      }
      active_.insert_or_assign(job.id(), JobAttempt(job.id(), job.attempt(), std::move(spec),
                                                    *std::move(plan), std::move(workers), now));
      if (job.has_attempt_evaluator()) {
        // Its evaluator too: busy, its reports and key-value access count, and it is lost
        // only as the workers are, when it has not registered again within the grace.
        const v1::AttemptWorkerRecord& e = job.attempt_evaluator();
        evaluators_[job.id()] = Evaluator{
            TaskRef{e.task_type(), e.task_index()}, e.incarnation(), job.attempt(), {}, false};
      }
      adopted_until_[job.id()] = now + failure_grace_;
      ChangedLocked(job.id(), absl::StrCat("re-adopted attempt ", job.attempt(),
                                           " after a coordinator restart"));
      continue;
    }
    if (job.state() == v1::RUNNING) {
      // Its attempt is not stored (a record from an older coordinator): the restart policy
      // decides.
      const int max_restarts = plan->restart().max_restarts();
      const std::string why = absl::StrCat(
          "coordinator restarted while the job was running "
          "(attempt ",
          job.attempt(), ")");
      // A store that does not take the state leaves it unsaved (retried), not the
      // coordinator down.
      if (job.restarts() < max_restarts) {
        SaveStateLocked(job.id(), v1::RESTARTING, RestartReason(why, job, max_restarts));
        scheduler_.Enqueue(job.id());
      } else {
        SaveStateLocked(job.id(), v1::FAILED,
                        absl::StrCat(why, NoRestartsLeft(job.restarts(), max_restarts)));
      }
    } else if (CanApply(JobTransition::kStartAttempt, job.state())) {
      scheduler_.Enqueue(job.id());
    }
  }
  return absl::OkStatus();
}

absl::Duration JobService::StoreWriteFailedLocked(const std::string& id, absl::string_view what,
                                                  const absl::Status& error, int failures) {
  ++store_write_failures_;
  const absl::Duration backoff =
      std::min(kMaxStoreRetryBackoff, absl::Milliseconds(500) * (1 << std::min(failures - 1, 6)));
  spdlog::error(
      "job {}: the job store did not take its {} (failure {} in a row): {}; trying again in {}; "
      "check the disk under the coordinator's --state_dir",
      id, std::string(what), failures, error.ToString(), absl::FormatDuration(backoff));
  return backoff;
}

void JobService::SaveStateLocked(const std::string& id, v1::JobState state,
                                 const std::string& reason, bool counts_as_restart) {
  unsaved_.erase(id);  // a newer decision replaces one not yet saved
  absl::Status status = store_->UpdateState(id, state, reason, counts_as_restart).status();
  if (status.ok()) return;
  if (absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) {
    // Not the disk: the stored job is past this state (or gone). Nothing to retry.
    spdlog::warn("job {}: not stored as {}: {}", id, v1::JobState_Name(state), status.ToString());
    return;
  }
  StoreRetry& retry = unsaved_[id];
  retry.failures = 1;
  retry.error = status.ToString();
  retry.state = state;
  retry.reason = reason;
  retry.counts_as_restart = counts_as_restart;
  retry.next_try = clock_->Now() + StoreWriteFailedLocked(id, v1::JobState_Name(state), status, 1);
}

void JobService::SaveUnsavedLocked() {
  const absl::Time now = clock_->Now();
  for (auto it = unsaved_.begin(); it != unsaved_.end();) {
    StoreRetry& retry = it->second;
    if (now < retry.next_try) {
      ++it;
      continue;
    }
    absl::Status status =
        store_->UpdateState(it->first, retry.state, retry.reason, retry.counts_as_restart).status();
    if (status.ok() || absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) {
      if (status.ok()) {
        spdlog::info("job {}: the job store took its {} after {} failed writes", it->first,
                     v1::JobState_Name(retry.state), retry.failures);
        if (IsTerminalJobState(retry.state)) retire_due_ = true;
      } else {
        spdlog::warn("job {}: not stored as {}: {}", it->first, v1::JobState_Name(retry.state),
                     status.ToString());
      }
      ChangedLocked(it->first, absl::StrCat(v1::JobState_Name(retry.state), ": ", retry.reason));
      it = unsaved_.erase(it);
      continue;
    }
    retry.failures += 1;
    retry.error = status.ToString();
    retry.next_try = now + StoreWriteFailedLocked(it->first, v1::JobState_Name(retry.state), status,
                                                  retry.failures);
    ++it;
  }
}

void JobService::OverlayUnsavedLocked(v1::JobRecord& record) const {
  auto it = unsaved_.find(record.id());
  if (it == unsaved_.end()) return;
  record.set_state(it->second.state);
  record.set_reason(absl::StrCat(
      it->second.reason, " (not yet saved in the job store: ", it->second.error, "; retrying)"));
}

JobService::StoreHealth JobService::GetStoreHealth() {
  absl::MutexLock l(&mu_);
  return StoreHealth{store_write_failures_, static_cast<int>(unsaved_.size())};
}

void JobService::RetireLocked() {
  if (!retire_due_ || retained_jobs_ <= 0) return;
  retire_due_ = false;
  absl::StatusOr<std::vector<std::string>> old = store_->EndedBeyond(retained_jobs_);
  if (!old.ok()) {
    retire_due_ = true;
    return;
  }
  std::vector<std::string> gone;
  for (const std::string& id : *old) {
    if (auto e = ended_.find(id); e != ended_.end() && !e->second.AllLeft()) {
      retire_due_ = true;  // its workers are still busy with it: later
      continue;
    }
    gone.push_back(id);
  }
  if (!store_->Delete(gone).ok()) {
    retire_due_ = true;
    return;
  }
  for (const std::string& id : gone) {
    start_retries_.erase(id);
    ended_.erase(id);
    changes_.erase(id);
    quick_failures_.erase(id);
    adopted_until_.erase(id);
  }
}

}  // namespace coordinator
}  // namespace lockstep
