// CoordinatorMetrics: what lockstep-coordinator shows Prometheus (`--metrics_address`), named
// lockstep_coordinator_*:
//   tasks{state=ALIVE|LOST|DEREGISTERED}, draining_tasks, heartbeat_age_seconds{task}
//   (seconds since each known task's last heartbeat), jobs{state=PENDING|RUNNING|...},
//   job_restarts (restarts of the stored jobs, summed), store_write_failures (job store
//   writes that failed since the start: a full or read-only disk under --state_dir) and
//   unsaved_jobs (jobs whose decided state the store has not taken yet, retried), all read
//   from the membership and the job service at every scrape; from the diagnostics
//   (hang_verdict.h), also at every scrape: hung_jobs (running jobs with a hang verdict) and
//   straggler_compute_ratio{job,task} (a straggler's compute time per step over the other
//   ranks' median; a series only while the rank is a straggler) and
//   diagnostics_dropped{reason} (workers' diagnostics dropped since the start,
//   diagnostics_service.h);
//   rpc_seconds{method} (latency histogram of unary RPCs, by full method name) and
//   rpcs_total{method,code} (every RPC, streams included, by status code), recorded by the
//   gRPC server's interceptor (rpc_metrics_interceptor.h).
//
// Ownership: borrows the registry (must outlive it) and, between Track() calls, the
// membership and the job service. Thread model: thread-safe (RPC threads record; scrapes
// read on the HTTP server's thread).
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_METRICS_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_METRICS_H_

#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/job_service.h"
#include "coordinator/membership.h"

namespace lockstep {
namespace coordinator {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(MetricsRegistry* registry);
  ~CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // Scrapes read tasks and jobs (and, when given, the hang verdicts and stragglers) from
  // these from now on; (nullptr, nullptr) before they go (CoordinatorServer::Shutdown).
  void Track(Membership* membership, JobService* jobs, DiagnosticsService* diagnostics = nullptr);
  // One RPC ended with gRPC status `code` after `latency`; `unary`: not a stream (streams
  // are only counted: their latency is their lifetime).
  void RpcDone(const std::string& method, bool unary, int code, absl::Duration latency);

 private:
  // Sets the gauges read from the membership and the job service.
  void Refresh();

  MetricsRegistry* const registry_;
  int refresh_id_ = -1;  // our OnCollect callback
  const Gauge draining_tasks_;
  const Gauge job_restarts_;
  const Gauge store_write_failures_;
  const Gauge unsaved_jobs_;

  absl::Mutex mu_;
  Membership* membership_ ABSL_GUARDED_BY(mu_) = nullptr;
  JobService* jobs_ ABSL_GUARDED_BY(mu_) = nullptr;
  DiagnosticsService* diagnostics_ ABSL_GUARDED_BY(mu_) = nullptr;
  const Gauge hung_jobs_;
  // Straggler ratios by (job, task): a series per straggler seen; removed once it is not.
  std::map<std::pair<std::string, std::string>, Gauge> stragglers_ ABSL_GUARDED_BY(mu_);
  // Heartbeat ages by task ("worker/0"): a series per task seen; one that is no longer
  // known is removed.
  std::map<std::string, Gauge> heartbeat_age_ ABSL_GUARDED_BY(mu_);

  absl::Mutex rpc_mu_;
  std::map<std::string, Histogram> rpc_seconds_ ABSL_GUARDED_BY(rpc_mu_);
  std::map<std::pair<std::string, int>, Counter> rpcs_ ABSL_GUARDED_BY(rpc_mu_);
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_METRICS_H_
