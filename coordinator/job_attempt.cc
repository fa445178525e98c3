#include "coordinator/job_attempt.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/incarnation.h"

namespace lockstep {
namespace coordinator {

bool EndsAttempt(v1::JobReport::Phase phase) {
  return phase == v1::JobReport::DONE || phase == v1::JobReport::FAILED ||
         phase == v1::JobReport::ABORTED || phase == v1::JobReport::PREEMPTED;
}

bool IsRelayedFailure(absl::string_view failure) {
  // The collectives name the peer whose failure they saw (collectives/transport/peer_failure.h).
  return absl::StrContains(failure, "peer rank") || absl::StrContains(failure, "left the group");
}

JobAttempt::JobAttempt(std::string job_id, int attempt, v1::JobSpec spec, v1::JobPlan plan,
                       std::vector<AttemptWorker> workers, absl::Time started)
    : job_id_(std::move(job_id)),
      attempt_(attempt),
      spec_(std::move(spec)),
      plan_(std::move(plan)),
      workers_(std::move(workers)),
      started_(started) {}

int JobAttempt::RankOf(const TaskRef& task) const {
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (workers_[r].task == task) return static_cast<int>(r);
  }
  return -1;
}

bool JobAttempt::OnReport(const TaskRef& task, const v1::JobReport& report, absl::Time now,
                          absl::Duration grace) {
  const int rank = RankOf(task);
  if (rank < 0 || state_ == State::kEnded) return false;
  reports_[rank] = report;
  if (report.phase() == v1::JobReport::PREEMPTED) {
    if (!report.preemption().empty()) {
      preemption_ =
          absl::StrCat(task.ToString(), " (rank ", rank, ") was preempted (", report.preemption(),
                       "); the job stopped after step ", report.step(), " with a checkpoint");
    } else if (preemption_.empty()) {
      preemption_ = absl::StrCat("preempted after step ", report.step(), ": checkpoint written");
    }
  }
  if (report.phase() != v1::JobReport::FAILED) return false;
  std::string failure =
      absl::StrCat(task.ToString(), " (rank ", rank,
                   ") failed: ", report.error().empty() ? "no error given" : report.error());
  if (state_ == State::kRunning) {
    Fail(std::move(failure), now + grace);
    return true;
  }
  // The first failure to arrive is often a peer's collective noticing the one that failed
  // (its connection closed); the failed worker's own error, when it comes, is the cause.
  if (IsRelayedFailure(failure_) && !IsRelayedFailure(failure)) {
    failure_ = absl::StrCat(failure, "; first seen by ", failure_);
  }
  return false;
}

void JobAttempt::Fail(std::string reason, absl::Time fail_at) {
  if (state_ != State::kRunning) return;
  state_ = State::kFailing;
  failure_ = std::move(reason);
  fail_at_ = fail_at;
}

void JobAttempt::End(absl::Time now, absl::Duration grace) {
  if (state_ == State::kEnded) return;
  state_ = State::kEnded;
  for (size_t r = 0; r < workers_.size(); ++r) {
    const v1::JobReport* report = ReportOf(static_cast<int>(r));
    if (report == nullptr || !EndsAttempt(report->phase()))
      leaving_[workers_[r].task] = now + grace;
  }
}

void JobAttempt::OnLeavingReport(const TaskRef& task, const v1::JobReport& report, absl::Time now,
                                 absl::Duration grace) {
  const int rank = RankOf(task);
  if (rank < 0 || state_ != State::kEnded) return;
  reports_[rank] = report;
  if (EndsAttempt(report.phase())) {
    leaving_.erase(task);  // left: may run the next job
  } else {
    leaving_[task] = now + grace;  // still in it
  }
}

// A worker leaves an ended attempt by reporting its end. Two things release it without
// that report:
// - It is no longer ALIVE under the incarnation it was given the job with (LOST,
//   DEREGISTERED, restarted, gone): that process will report nothing more, and a worker
//   that finds itself LOST or restarted drops its jobs; it must register again (and so
//   become ALIVE) before it is given a new one.
// - It said nothing about the attempt for the failure grace (at least heartbeat_timeout +
//   heartbeat_interval, so at least one heartbeat fell in it). Every heartbeat carries a
//   report of every job the worker still holds, finished ones included, so an ALIVE
//   worker silent about the attempt no longer holds it: it never received the partition,
//   or its final reports were lost on the way.
// A worker whose heartbeats keep reporting the attempt as running is NOT released, however
// long it takes: it says it still holds the job's threads, memory and ports, and a new
// partition started beside it would compete with it or fail. Every such report is
// answered with another abort (OnReports); if its executor never returns, the worker is
// stuck, `lockstep describe` of the ended job shows it, and restarting its lockstepd (a
// new incarnation) releases it. A silent worker therefore blocks nothing for longer than
// the grace, and a stuck one blocks only the jobs that would need it.
void JobAttempt::ReleaseLeft(const std::map<TaskRef, const v1::TaskStatus*>& tasks,
                             absl::Time now) {
  for (auto it = leaving_.begin(); it != leaving_.end();) {
    auto t = tasks.find(it->first);
    const int rank = RankOf(it->first);
    const bool gone = t == tasks.end() || t->second->state() != v1::ALIVE ||
                      t->second->incarnation() != workers_[rank].incarnation;
    it = gone || now >= it->second ? leaving_.erase(it) : std::next(it);
  }
}

JobAttempt::Outcome JobAttempt::Settle(absl::Time now) const {
  if (state_ == State::kEnded) return Outcome::kUndecided;
  int done = 0, ended = 0;
  for (const auto& [rank, report] : reports_) {
    done += report.phase() == v1::JobReport::DONE;
    ended += EndsAttempt(report.phase());
  }
  const int n = size();
  if (state_ == State::kFailing) {
    return ended == n || now >= fail_at_ ? Outcome::kFailed : Outcome::kUndecided;
  }
  if (!preemption_.empty() && ended == n) return Outcome::kPreempted;
  if (done == n) return Outcome::kSucceeded;
  return Outcome::kUndecided;
}

std::string JobAttempt::FindLostWorker(const std::map<TaskRef, const v1::TaskStatus*>& tasks,
                                       absl::Duration heartbeat_timeout, int* lost_rank) const {
  for (size_t rank = 0; rank < workers_.size(); ++rank) {
    const AttemptWorker& w = workers_[rank];
    const v1::JobReport* report = ReportOf(static_cast<int>(rank));
    if (report != nullptr && EndsAttempt(report->phase())) continue;
    auto t = tasks.find(w.task);
    std::string why;
    if (t == tasks.end()) {
      why = "is no longer registered";
    } else if (t->second->incarnation() != w.incarnation) {
      why = absl::StrCat("restarted (incarnation ", ShortIncarnation(t->second->incarnation()),
                         " replaced ", ShortIncarnation(w.incarnation), ")");
    } else if (t->second->state() == v1::LOST) {
      why = absl::StrCat("was lost: no heartbeat for ", absl::FormatDuration(heartbeat_timeout),
                         "; check that lockstepd at ", t->second->address(), " is running");
    } else if (t->second->state() == v1::DEREGISTERED) {
      why = "left the cluster (deregistered) while running the job";
    }
    if (!why.empty()) {
      if (lost_rank != nullptr) *lost_rank = static_cast<int>(rank);
      return absl::StrCat(w.task.ToString(), " (rank ", rank, ") ", why);
    }
  }
  return "";
}

std::vector<AttemptWorker> JobAttempt::Unended(const TaskRef& except) const {
  std::vector<AttemptWorker> out;
  for (size_t rank = 0; rank < workers_.size(); ++rank) {
    if (workers_[rank].task == except) continue;
    const v1::JobReport* report = ReportOf(static_cast<int>(rank));
    if (report != nullptr && EndsAttempt(report->phase())) continue;
    out.push_back(workers_[rank]);
  }
  return out;
}

bool JobAttempt::Holds(const TaskRef& task) const {
  if (state_ == State::kEnded) return leaving_.count(task) > 0;
  return RankOf(task) >= 0;
}

std::vector<v1::JobReport> JobAttempt::Reports() const {
  std::vector<v1::JobReport> out;
  for (const auto& [rank, report] : reports_) out.push_back(report);
  return out;
}

const v1::JobReport* JobAttempt::ReportOf(int rank) const {
  auto it = reports_.find(rank);
  return it == reports_.end() ? nullptr : &it->second;
}

}  // namespace coordinator
}  // namespace lockstep
