#include "coordinator/coordinator_metrics.h"

#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job.pb.h"

namespace lockstep {
namespace coordinator {
namespace {

constexpr const char kTasks[] = "lockstep_coordinator_tasks";
constexpr const char kTasksHelp[] = "Known tasks by state.";
constexpr const char kJobs[] = "lockstep_coordinator_jobs";
constexpr const char kJobsHelp[] = "Stored jobs by state.";
constexpr const char kHeartbeatAge[] = "lockstep_coordinator_heartbeat_age_seconds";
constexpr const char kHeartbeatAgeHelp[] = "Seconds since a task's last heartbeat.";
constexpr const char kDropped[] = "lockstep_coordinator_diagnostics_dropped";
constexpr const char kDroppedHelp[] =
    "Workers' diagnostics (log lines, flight records) dropped since the start, by reason: "
    "not_its_attempt (a task reported on an attempt it is not a worker of), line_too_long, "
    "record_too_large, evicted (a task's oldest lines, past its bounds).";
constexpr const char kStraggler[] = "lockstep_coordinator_straggler_compute_ratio";
constexpr const char kStragglerHelp[] =
    "A straggler's compute time per step over the other ranks' median (only stragglers).";

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(MetricsRegistry* registry)
    : registry_(registry),
      draining_tasks_(registry->AddGauge("lockstep_coordinator_draining_tasks",
                                         "Tasks drained or leaving: no job is scheduled on them.")),
      job_restarts_(registry->AddGauge(
          "lockstep_coordinator_job_restarts",
          "Restarts after failures of the stored jobs, summed (preemptions not counted).")),
      store_write_failures_(registry->AddGauge(
          "lockstep_coordinator_store_write_failures",
          "Job store writes that failed since the coordinator started (check the disk under "
          "--state_dir).")),
      unsaved_jobs_(registry->AddGauge(
          "lockstep_coordinator_unsaved_jobs",
          "Jobs whose decided state the job store has not taken yet (retried with a backoff).")),
      hung_jobs_(registry->AddGauge(
          "lockstep_coordinator_hung_jobs",
          "Running jobs with a hang verdict: a collective waited past the threshold.")) {
  refresh_id_ = registry->OnCollect([this] { Refresh(); });
}

CoordinatorMetrics::~CoordinatorMetrics() { registry_->RemoveOnCollect(refresh_id_); }

void CoordinatorMetrics::Track(Membership* membership, JobService* jobs,
                               DiagnosticsService* diagnostics) {
  absl::MutexLock l(&mu_);
  membership_ = membership;
  jobs_ = jobs;
  diagnostics_ = diagnostics;
}

void CoordinatorMetrics::Refresh() {
  absl::MutexLock l(&mu_);
  if (membership_ == nullptr || jobs_ == nullptr) return;
  std::map<int, int> tasks;  // by state
  int draining = 0;
  std::set<std::string> seen;
  for (const v1::TaskStatus& t : membership_->Snapshot()) {
    ++tasks[t.state()];
    if (t.draining()) ++draining;
    const std::string task = absl::StrCat(t.task().type(), "/", t.task().index());
    seen.insert(task);
    auto it = heartbeat_age_.find(task);
    if (it == heartbeat_age_.end()) {
      it = heartbeat_age_
               .emplace(task,
                        registry_->AddGauge(kHeartbeatAge, kHeartbeatAgeHelp, {{"task", task}}))
               .first;
    }
    it->second.Set(t.seconds_since_heartbeat());
  }
  for (auto it = heartbeat_age_.begin(); it != heartbeat_age_.end();) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    registry_->Remove(it->second);
    it = heartbeat_age_.erase(it);
  }
  for (int s = v1::TaskState_MIN + 1; s <= v1::TaskState_MAX; ++s) {
    if (!v1::TaskState_IsValid(s)) continue;
    registry_
        ->AddGauge(kTasks, kTasksHelp,
                   {{"state", v1::TaskState_Name(static_cast<v1::TaskState>(s))}})
        .Set(tasks[s]);
  }
  draining_tasks_.Set(draining);
  const JobService::StoreHealth store = jobs_->GetStoreHealth();
  store_write_failures_.Set(static_cast<double>(store.write_failures));
  unsaved_jobs_.Set(store.unsaved_jobs);

  absl::StatusOr<std::vector<v1::JobRecord>> jobs = jobs_->List(0);
  if (!jobs.ok()) return;  // the store's error is the job commands' to report
  std::map<int, int> by_state;
  int64_t restarts = 0;
  for (const v1::JobRecord& j : *jobs) {
    ++by_state[j.state()];
    restarts += j.restarts();
  }
  for (int s = v1::JobState_MIN + 1; s <= v1::JobState_MAX; ++s) {
    if (!v1::JobState_IsValid(s)) continue;
    registry_
        ->AddGauge(kJobs, kJobsHelp, {{"state", v1::JobState_Name(static_cast<v1::JobState>(s))}})
        .Set(by_state[s]);
  }
  job_restarts_.Set(static_cast<double>(restarts));
  if (diagnostics_ == nullptr) return;
  for (DiagnosticsDrop reason : kAllDiagnosticsDrops) {
    registry_->AddGauge(kDropped, kDroppedHelp, {{"reason", DiagnosticsDropName(reason)}})
        .Set(static_cast<double>(diagnostics_->dropped(reason)));
  }
  int hung = 0;
  std::set<std::pair<std::string, std::string>> stragglers;
  for (const v1::JobRecord& j : *jobs) {
    if (j.state() != v1::RUNNING) continue;
    const v1::JobDiagnosis d = diagnostics_->Diagnose(j);
    if (!d.hang_verdict().empty()) ++hung;
    for (const v1::StragglerRank& s : d.straggler_ranks()) {
      const auto key = std::make_pair(j.id(), s.task());
      stragglers.insert(key);
      auto it = stragglers_.find(key);
      if (it == stragglers_.end()) {
        it = stragglers_
                 .emplace(key, registry_->AddGauge(kStraggler, kStragglerHelp,
                                                   {{"job", j.id()}, {"task", s.task()}}))
                 .first;
      }
      it->second.Set(s.median_ms() > 0 ? s.compute_ms() / s.median_ms() : 0);
    }
  }
  hung_jobs_.Set(hung);
  for (auto it = stragglers_.begin(); it != stragglers_.end();) {
    if (stragglers.count(it->first) > 0) {
      ++it;
      continue;
    }
    registry_->Remove(it->second);
    it = stragglers_.erase(it);
  }
}

void CoordinatorMetrics::RpcDone(const std::string& method, bool unary, int code,
                                 absl::Duration latency) {
  absl::MutexLock l(&rpc_mu_);
  auto counter = rpcs_.find({method, code});
  if (counter == rpcs_.end()) {
    const std::string code_name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    counter = rpcs_
                  .emplace(std::make_pair(method, code),
                           registry_->AddCounter("lockstep_coordinator_rpcs_total",
                                                 "RPCs answered, by method and status code.",
                                                 {{"method", method}, {"code", code_name}}))
                  .first;
  }
  counter->second.Increment();
  if (!unary) return;
  auto histogram = rpc_seconds_.find(method);
  if (histogram == rpc_seconds_.end()) {
    histogram = rpc_seconds_
                    .emplace(method, registry_->AddHistogram("lockstep_coordinator_rpc_seconds",
                                                             "Latency of unary RPCs, by method.",
                                                             ExponentialBuckets(1e-4, 2.5, 14),
                                                             {{"method", method}}))
                    .first;
  }
  histogram->second.Observe(absl::ToDoubleSeconds(latency));
}

}  // namespace coordinator
}  // namespace lockstep
