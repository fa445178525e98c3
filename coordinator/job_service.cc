// JobService (job_service.h), the parts every other file of it uses: construction, the
// failure grace, who runs which attempt (key access, RunsAttempt, RunningTasks), draining,
// shutdown, and the mailboxes and change versions that the watches read. The service is
// split along its seams: submit and queue (job_service_submit.cc), attempts and reports
// (job_service_attempts.cc), watches (job_service_watch.cc), recovery and the store
// (job_service_recovery.cc). One mutex (mu_) guards all of it; see job_service.h.
#include "coordinator/job_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace lockstep {
namespace coordinator {

absl::Duration EffectiveFailureGrace(const JobServiceOptions& options,
                                     const MembershipOptions& membership) {
  return std::max(options.failure_grace,
                  membership.heartbeat_timeout + membership.heartbeat_interval);
}

JobService::JobService(JobStore* store, Membership* membership, Clock* clock,
                       JobServiceOptions options)
    : store_(store),
      membership_(membership),
      clock_(clock),
      failure_grace_(EffectiveFailureGrace(options, membership->options())),
      on_attempt_ended_(std::move(options.on_attempt_ended)),
      limits_(options.limits),
      max_pending_jobs_(options.max_pending_jobs),
      retained_jobs_(options.retained_jobs),
      watches_(options.watches) {}

absl::Status JobService::CheckKeyAccess(const std::string& identity, const std::string& key) {
  if (identity.empty() || !absl::StartsWith(key, "jobs/")) return absl::OkStatus();
  std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 3));
  int attempt = 0;
  if (parts.size() < 4 || !absl::SimpleAtoi(parts[2], &attempt)) {
    return absl::PermissionDeniedError(
        absl::StrCat("key \"", key, "\": job keys are jobs/<job>/<attempt>/<name>"));
  }
  absl::MutexLock l(&mu_);
  auto it = active_.find(parts[1]);
  if (it == active_.end() || it->second.attempt() != attempt) {
    return absl::PermissionDeniedError(
        absl::StrCat("key \"", key, "\": job ", parts[1], " attempt ", attempt, " is not running"));
  }
  for (const AttemptWorker& w : it->second.workers()) {
    if (membership_->IdentityOf(w.task) == identity) return absl::OkStatus();
  }
  if (auto e = evaluators_.find(parts[1]); e != evaluators_.end() && !e->second.ended &&
                                           e->second.attempt == attempt &&
                                           membership_->IdentityOf(e->second.task) == identity) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "key \"", key, "\": ", identity, " is not a worker of job ", parts[1], " attempt ", attempt));
}

bool JobService::RunsAttempt(const TaskRef& task, const std::string& job_id, int attempt) {
  absl::MutexLock l(&mu_);
  for (const std::map<std::string, JobAttempt>* attempts : {&active_, &ended_}) {
    auto it = attempts->find(job_id);
    if (it != attempts->end() && it->second.attempt() == attempt && it->second.RankOf(task) >= 0) {
      return true;
    }
  }
  auto e = evaluators_.find(job_id);
  return e != evaluators_.end() && e->second.attempt == attempt && e->second.task == task;
}

std::map<TaskRef, std::pair<std::string, int64_t>> JobService::RunningTasks() {
  absl::MutexLock l(&mu_);
  std::map<TaskRef, std::pair<std::string, int64_t>> out;
  for (const auto& [id, job] : active_) {
    for (int rank = 0; rank < job.size(); ++rank) {
      const v1::JobReport* r = job.ReportOf(rank);
      out[job.workers()[rank].task] = {id, r == nullptr ? 0 : r->step()};
    }
  }
  for (const auto& [id, e] : evaluators_) {
    if (!e.ended) out[e.task] = {id, e.report.step()};
  }
  return out;
}

absl::StatusOr<v1::DrainWorkerResponse> JobService::Drain(const TaskRef& task, bool undo) {
  v1::DrainWorkerResponse out;
  LS_ASSIGN_OR_RETURN(*out.mutable_task(), membership_->SetDraining(task, !undo));
  absl::MutexLock l(&mu_);
  if (!undo) {
    for (const auto& [id, job] : active_) {
      const int rank = job.RankOf(task);
      if (rank < 0) continue;
      v1::Assignment a;
      a.mutable_preempt()->set_job_id(id);
      a.mutable_preempt()->set_attempt(job.attempt());
      a.mutable_preempt()->set_reason(absl::StrCat(task.ToString(), " was drained"));
      PushLocked(task, job.workers()[rank].incarnation, std::move(a));
      out.set_job_id(id);
    }
  }
  ScheduleLocked();  // an undo may let a waiting job start
  return out;
}

void JobService::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

std::string JobUid(const v1::JobRecord& record) {
  return absl::StrCat(record.id(), "@", record.created_unix_micros());
}

absl::Status JobService::SendDirective(const TaskRef& task, v1::Assignment directive) {
  for (const v1::TaskStatus& t : membership_->Snapshot()) {
    if (RefOf(t) != task) continue;
    if (t.state() != v1::ALIVE) {
      return absl::UnavailableError(
          absl::StrCat(task.ToString(), " is ", v1::TaskState_Name(t.state()), ", not connected"));
    }
    absl::MutexLock l(&mu_);
    PushLocked(task, t.incarnation(), std::move(directive));
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat(task.ToString(), " is not registered with this coordinator"));
}

void JobService::PushLocked(const TaskRef& task, uint64_t incarnation, v1::Assignment a) {
  Mailbox& box = mailboxes_[task];
  if (box.incarnation != incarnation) box = Mailbox{incarnation, {}};
  box.queue.push_back(std::move(a));
}

void JobService::ChangedLocked(const std::string& id, std::string message) {
  changes_[id] = {++version_, std::move(message)};
}

bool JobService::IsBusyLocked(const TaskRef& task) const {
  for (const auto& [id, job] : active_) {
    if (job.Holds(task)) return true;
  }
  for (const auto& [id, job] : ended_) {
    if (job.Holds(task)) return true;
  }
  for (const auto& [id, e] : evaluators_) {
    if (!e.ended && e.task == task) return true;
  }
  return false;
}

int64_t JobService::VersionLocked(const std::string& id) const {
  auto it = changes_.find(id);
  return it == changes_.end() ? 1 : it->second.first;
}

}  // namespace coordinator
}  // namespace lockstep
