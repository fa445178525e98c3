#include "worker/job_runner.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace worker {

JobRunner::JobRunner(JobExecutorOptions options, int final_report_repeats)
    : options_(std::move(options)), final_report_repeats_(std::max(1, final_report_repeats)) {}

JobRunner::~JobRunner() {
  DropAll("the worker is shutting down");
  std::map<Key, Job> jobs;
  {
    absl::MutexLock l(&mu_);
    jobs.swap(jobs_);
  }
  for (auto& [key, job] : jobs) {
    if (job.thread.joinable()) job.thread.join();
  }
}

void JobRunner::Handle(const v1::Assignment& assignment) {
  if (assignment.has_run()) {
    Start(assignment.run());
  } else if (assignment.has_abort()) {
    Abort(assignment.abort());
  } else if (assignment.has_preempt()) {
    Preempt(assignment.preempt());
  }
}

void JobRunner::Preempt(const v1::PreemptJob& preempt) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(Key{preempt.job_id(), preempt.attempt()});
  if (it == jobs_.end() || it->second.finished || it->second.executor == nullptr) return;
  it->second.executor->Preempt(preempt.reason().empty() ? "PreemptJob from the coordinator"
                                                        : preempt.reason());
}

void JobRunner::Start(const v1::Partition& partition) {
  const Key key{partition.job_id(), partition.attempt()};
  absl::MutexLock l(&mu_);
  if (jobs_.count(key) > 0) return;  // a duplicate push (stream reopened)
  for (auto& [other, job] : jobs_) {
    if (other.first == key.first && other.second < key.second && job.executor != nullptr) {
      job.executor->Abort(absl::StrCat("attempt ", key.second, " of the job replaces it"));
    }
  }
  Job& job = jobs_[key];
  absl::StatusOr<std::unique_ptr<JobExecutor>> executor = JobExecutor::Create(partition, options_);
  if (!executor.ok()) {
    job.finished = true;
    job.final_report.set_job_id(key.first);
    job.final_report.set_attempt(key.second);
    job.final_report.set_phase(v1::JobReport::FAILED);
    job.final_report.set_error(absl::StrCat("job ", key.first, " attempt ", key.second,
                                            " cannot start: ", executor.status().message()));
    spdlog::error("{}", job.final_report.error());
    return;
  }
  job.executor = std::move(*executor);
  JobExecutor* e = job.executor.get();
  job.thread = std::thread([this, key, e] { Finished(key, e->Run()); });
}

void JobRunner::Finished(const Key& key, v1::JobReport report) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  it->second.finished = true;
  it->second.final_report = std::move(report);
}

void JobRunner::Abort(const v1::AbortJob& abort) {
  absl::MutexLock l(&mu_);
  for (auto& [key, job] : jobs_) {
    if (key.first == abort.job_id() && key.second <= abort.attempt() && job.executor != nullptr) {
      const std::string reason =
          abort.reason().empty() ? "AbortJob from the coordinator" : abort.reason();
      if (abort.has_lost()) {
        job.executor->PeerLost(abort.lost().worker_rank(), reason);
      } else {
        job.executor->Abort(reason);
      }
    }
  }
}

void JobRunner::DropAll(const std::string& reason) {
  absl::MutexLock l(&mu_);
  for (auto& [key, job] : jobs_) {
    if (job.executor != nullptr) job.executor->Abort(reason);
  }
}

std::vector<v1::JobReport> JobRunner::Reports() {
  std::vector<v1::JobReport> reports;
  absl::MutexLock l(&mu_);
  for (auto& [key, job] : jobs_) {
    if (!job.finished) {
      reports.push_back(job.executor->report());
      continue;
    }
    reports.push_back(job.final_report);
    job.offered = true;
  }
  return reports;
}

std::vector<v1::JobDiagnostics> JobRunner::Diagnostics() {
  std::vector<v1::JobDiagnostics> out;
  absl::MutexLock l(&mu_);
  for (auto& [key, job] : jobs_) {
    if (job.executor == nullptr) continue;
    out.push_back(job.executor->diagnostics());
    const v1::JobDiagnostics& d = out.back();
    if (d.log_lines_size() > 0) job.log_offered = d.log_lines(d.log_lines_size() - 1).seq();
  }
  return out;
}

void JobRunner::ReportsDelivered() {
  std::vector<Job> done;  // joined and freed outside the lock
  {
    absl::MutexLock l(&mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      Job& job = it->second;
      if (job.executor != nullptr) job.executor->LogDelivered(job.log_offered);
      if (!job.offered || ++job.reported < final_report_repeats_) {
        job.offered = false;
        ++it;
        continue;
      }
      done.push_back(std::move(job));
      it = jobs_.erase(it);
    }
  }
  for (Job& job : done) {
    if (job.thread.joinable()) job.thread.join();  // then its executor is freed
  }
}

int JobRunner::running() const {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (const auto& [key, job] : jobs_) n += job.finished ? 0 : 1;
  return n;
}

int JobRunner::PreemptAll(const std::string& reason) {
  absl::MutexLock l(&mu_);
  int asked = 0;
  for (auto& [key, job] : jobs_) {
    if (job.finished || job.executor == nullptr) continue;
    job.executor->Preempt(reason);
    ++asked;
  }
  return asked;
}

bool JobRunner::WaitReported(absl::Time deadline) const {
  absl::MutexLock l(&mu_);
  auto reported = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [key, job] : jobs_) {
      if (!job.finished || job.reported == 0) return false;
    }
    return true;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&reported), deadline);
}

bool JobRunner::WaitIdle(absl::Time deadline) const {
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [key, job] : jobs_) {
      if (!job.finished) return false;
    }
    return true;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace worker
}  // namespace lockstep
