#include "coordinator/diagnostics_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "coordinator/job_store/job_store.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

DiagnosticsService::DiagnosticsService(JobService* jobs, Clock* clock, DiagnosticsOptions options)
    : jobs_(jobs), clock_(clock), options_([&] {
        // Tied to the heartbeats unless set: a verdict within two heartbeat intervals.
        if (options.verdict.stale_after == VerdictOptions().stale_after) {
          options.verdict.stale_after = options.heartbeat_interval * 1.5;
        }
        if (options.verdict.min_wait == VerdictOptions().min_wait) {
          options.verdict.min_wait = options.heartbeat_interval / 2;
        }
        return options;
      }()) {}

const char* DiagnosticsDropName(DiagnosticsDrop drop) {
  switch (drop) {
    case DiagnosticsDrop::kNotItsAttempt:
      return "not_its_attempt";
    case DiagnosticsDrop::kLineTooLong:
      return "line_too_long";
    case DiagnosticsDrop::kRecordTooLarge:
      return "record_too_large";
    case DiagnosticsDrop::kEvicted:
      return "evicted";
  }
  return "unknown";
}

void DiagnosticsService::OnHeartbeat(const TaskRef& task,
                                     const std::vector<v1::JobDiagnostics>& diagnostics) {
  if (diagnostics.empty()) return;
  // Which of them the task may speak for, asked before this service's lock (JobService has
  // its own, and NextLogs takes them in the same order).
  std::vector<bool> its_own;
  its_own.reserve(diagnostics.size());
  for (const v1::JobDiagnostics& d : diagnostics) {
    its_own.push_back(!d.job_id().empty() && jobs_->RunsAttempt(task, d.job_id(), d.attempt()));
  }
  const DiagnosticsLimits& limits = options_.limits;
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const v1::JobDiagnostics& d = diagnostics[i];
    if (!its_own[i]) {
      Drop(task, d.job_id(), DiagnosticsDrop::kNotItsAttempt, 1 + d.log_lines_size());
      continue;
    }
    JobEntry& job = by_job_[d.job_id()];
    job.updated = now;
    TaskEntry& t = job.tasks[{d.attempt(), task}];
    if (d.has_record()) {
      if (d.record().ByteSizeLong() > limits.max_record_bytes) {
        Drop(task, d.job_id(), DiagnosticsDrop::kRecordTooLarge, 1);
      } else {
        t.rank = d.record().worker_rank();
        t.record = d.record();
        t.has_record = true;
        t.received = now;
      }
    }
    int64_t too_long = 0;
    for (const v1::LogLine& line : d.log_lines()) {
      if (line.seq() <= t.last_seq) continue;  // a heartbeat that went again
      t.last_seq = line.seq();
      if (line.text().size() > limits.max_line_bytes) {
        ++too_long;
        continue;
      }
      t.lines.push_back(line);
      t.line_bytes += line.text().size();
      ++version_;
    }
    if (too_long > 0) Drop(task, d.job_id(), DiagnosticsDrop::kLineTooLong, too_long);
    int64_t evicted = 0;
    while (t.lines.size() > limits.log_lines_per_task || t.line_bytes > limits.log_bytes_per_task) {
      t.line_bytes -= t.lines.front().text().size();
      t.lines.pop_front();
      ++evicted;
    }
    if (evicted > 0) Drop(task, d.job_id(), DiagnosticsDrop::kEvicted, evicted);
    t.finished |= d.finished();
    if (d.finished()) ++version_;
    ForgetOldAttempts(job);
  }
  ForgetOldJobs();
}

void DiagnosticsService::Drop(const TaskRef& task, const std::string& job_id,
                              DiagnosticsDrop reason, int64_t n) {
  dropped_[reason] += n;
  if (!noticed_.insert({task, reason}).second) return;
  spdlog::warn(
      "diagnostics from {} dropped ({}, job {}): {}; counted in "
      "lockstep_coordinator_diagnostics_dropped, not logged again for this task",
      task.ToString(), DiagnosticsDropName(reason), job_id,
      reason == DiagnosticsDrop::kNotItsAttempt
          ? "it is not a worker of that job attempt"
          : "over the coordinator's limits for one task's diagnostics (DiagnosticsLimits)");
}

int64_t DiagnosticsService::dropped(DiagnosticsDrop reason) const {
  absl::MutexLock l(&mu_);
  auto it = dropped_.find(reason);
  return it == dropped_.end() ? 0 : it->second;
}

void DiagnosticsService::ForgetOldAttempts(JobEntry& job) {
  std::set<int> attempts;
  for (const auto& [key, t] : job.tasks) attempts.insert(key.first);
  while (attempts.size() > options_.limits.attempts_per_job) {
    const int oldest = *attempts.begin();
    attempts.erase(attempts.begin());
    for (auto it = job.tasks.begin(); it != job.tasks.end();) {
      it = it->first.first == oldest ? job.tasks.erase(it) : std::next(it);
    }
  }
}

void DiagnosticsService::ForgetOldJobs() {
  while (by_job_.size() > options_.limits.max_jobs) {
    auto oldest = by_job_.begin();
    for (auto it = by_job_.begin(); it != by_job_.end(); ++it) {
      if (it->second.updated < oldest->second.updated) oldest = it;
    }
    by_job_.erase(oldest);
  }
}

v1::JobDiagnosis DiagnosticsService::Diagnose(const v1::JobRecord& job) const {
  v1::JobDiagnosis out;
  out.set_job_id(job.id());
  const absl::Time now = clock_->Now();
  std::vector<RankView> views;
  std::map<int, TaskRef> task_of;  // rank -> task
  {
    absl::MutexLock l(&mu_);
    auto it = by_job_.find(job.id());
    const std::map<Key, TaskEntry>* tasks = it == by_job_.end() ? nullptr : &it->second.tasks;
    int attempt = job.attempt();
    if (job.attempt_workers_size() > 0) {
      // The attempt's ranks, reported or not.
      for (int rank = 0; rank < job.attempt_workers_size(); ++rank) {
        const v1::AttemptWorkerRecord& w = job.attempt_workers(rank);
        const TaskRef task{w.task_type(), w.task_index()};
        task_of[rank] = task;
        RankView v;
        v.task = task.ToString();
        v.rank = rank;
        if (tasks != nullptr) {
          auto t = tasks->find({attempt, task});
          if (t != tasks->end() && t->second.has_record) {
            v.record = t->second.record;
            v.record_age = now - t->second.received;
          }
        }
        views.push_back(std::move(v));
      }
    } else if (tasks != nullptr && !tasks->empty()) {
      // The job ended: the latest attempt the workers reported on.
      attempt = tasks->rbegin()->first.first;
      for (const auto& [key, t] : *tasks) {
        if (key.first != attempt || !t.has_record) continue;
        task_of[t.rank] = key.second;
        views.push_back({key.second.ToString(), t.rank, t.record, now - t.received});
      }
    }
    out.set_attempt(attempt);
  }
  if (job.state() == v1::RUNNING) {
    Verdict verdict = coordinator::Diagnose(views, options_.verdict);
    out.set_hang_verdict(verdict.hang);
    for (std::string& s : verdict.stragglers) out.add_stragglers(std::move(s));
    for (const Straggler& s : verdict.straggler_ranks) {
      v1::StragglerRank* r = out.add_straggler_ranks();
      r->set_task(s.task);
      r->set_compute_ms(s.compute_ms);
      r->set_median_ms(s.median_ms);
    }
  }
  std::sort(views.begin(), views.end(),
            [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
  for (RankView& v : views) {
    v1::RankDiagnosis* r = out.add_ranks();
    r->mutable_task()->set_type(task_of[v.rank].type);
    r->mutable_task()->set_index(task_of[v.rank].index);
    r->set_worker_rank(v.rank);
    if (v.record.has_value()) {
      *r->mutable_record() = std::move(*v.record);
      r->set_heartbeat_age_ms(absl::ToInt64Milliseconds(v.record_age));
    }
  }
  return out;
}

void DiagnosticsService::Annotate(v1::GetJobResponse* response) const {
  v1::JobDiagnosis d = Diagnose(response->job());
  d.clear_ranks();
  *response->mutable_diagnosis() = std::move(d);
}

void DiagnosticsService::Annotate(v1::GetClusterStatusResponse* response) const {
  std::vector<std::string> ids;
  for (const v1::TaskStatus& t : response->tasks()) {
    if (!t.job_id().empty() && std::find(ids.begin(), ids.end(), t.job_id()) == ids.end()) {
      ids.push_back(t.job_id());
    }
  }
  for (const std::string& id : ids) {
    absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(id);
    if (!job.ok()) continue;
    v1::JobDiagnosis d = Diagnose(job->job());
    if (d.hang_verdict().empty() && d.stragglers().empty()) continue;
    d.clear_ranks();
    *response->add_diagnoses() = std::move(d);
  }
}

absl::StatusOr<v1::DumpJobResponse> DiagnosticsService::Dump(const std::string& job_id) const {
  absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(job_id);
  if (!job.ok()) return job.status();
  v1::DumpJobResponse out;
  *out.mutable_diagnosis() = Diagnose(job->job());
  return out;
}

std::optional<v1::JobLogLines> DiagnosticsService::TakeLines(const v1::GetJobLogsRequest& request,
                                                             LogCursor* cursor) const {
  auto it = by_job_.find(request.job_id());
  if (it == by_job_.end()) return std::nullopt;
  const TaskRef filter{request.task().type(), request.task().index()};
  for (const auto& [key, t] : it->second.tasks) {
    if (request.has_task() && key.second != filter) continue;
    int64_t& sent = cursor->sent[key];
    if (t.last_seq <= sent) continue;
    v1::JobLogLines out;
    out.mutable_task()->set_type(key.second.type);
    out.mutable_task()->set_index(key.second.index);
    out.set_attempt(key.first);
    for (const v1::LogLine& line : t.lines) {
      if (line.seq() <= sent) continue;
      *out.add_lines() = line;
      if (static_cast<size_t>(out.lines_size()) == options_.log_lines_per_message) break;
    }
    sent = out.lines_size() > 0 ? out.lines(out.lines_size() - 1).seq() : t.last_seq;
    if (out.lines_size() > 0) return out;
  }
  return std::nullopt;
}

bool DiagnosticsService::AllFinished(const std::string& job_id) const {
  auto it = by_job_.find(job_id);
  if (it == by_job_.end() || it->second.tasks.empty()) return true;
  const int attempt = it->second.tasks.rbegin()->first.first;
  for (const auto& [key, t] : it->second.tasks) {
    if (key.first == attempt && !t.finished) return false;
  }
  return true;
}

absl::StatusOr<v1::JobLogLines> DiagnosticsService::NextLogs(const v1::GetJobLogsRequest& request,
                                                             LogCursor* cursor,
                                                             absl::Time deadline) {
  // The job's state, read before this service's lock (JobService has its own).
  absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(request.job_id());
  if (!job.ok()) return job.status();
  const absl::Time now = clock_->Now();
  if (IsTerminalJobState(job->job().state()) && cursor->job_ended == absl::InfiniteFuture()) {
    cursor->job_ended = now;
  }
  v1::JobLogLines end;
  end.set_end(true);
  absl::MutexLock l(&mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (std::optional<v1::JobLogLines> lines = TakeLines(request, cursor)) return *std::move(lines);
  if (!request.follow()) return end;
  if (cursor->job_ended != absl::InfiniteFuture() &&
      (AllFinished(request.job_id()) ||
       now - cursor->job_ended > 2 * options_.heartbeat_interval)) {
    return end;
  }
  // Wait for new lines, at most a heartbeat interval, so that the job's end is seen.
  const int64_t seen = version_;
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != seen || shutdown_; };
  clock_->WaitUntil(&mu_, absl::Condition(&changed),
                    std::min(deadline, now + options_.heartbeat_interval));
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (std::optional<v1::JobLogLines> lines = TakeLines(request, cursor)) return *std::move(lines);
  return absl::DeadlineExceededError("no new log lines yet");
}

void DiagnosticsService::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

}  // namespace coordinator
}  // namespace lockstep
