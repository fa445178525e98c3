// JobRunner: the worker's jobs. Runs each Partition it is handed in a JobExecutor on a
// thread of its own, aborts them on AbortJob (or all of them when the agent drops its
// jobs), preempts one on PreemptJob (JobExecutor::Preempt), and collects their JobReports for the
// heartbeats. Partitions are scoped by (job_id, attempt): a partition of a newer attempt aborts the
// older one; a duplicate of a running one, or an abort of an attempt it does not run, is ignored.
//
// A partition that cannot even start (JobExecutor::Create refuses it) is reported FAILED
// with the reason. Final reports stay in Reports() until `final_report_repeats` heartbeats
// delivered them (ReportsDelivered), however long the coordinator is away, then the job's
// thread is joined and its executor freed.
//
// Ownership: owns the executors and their threads; borrows what JobExecutorOptions holds.
// The destructor aborts every job and joins every thread. Thread model: thread-safe.
#ifndef LOCKSTEP_WORKER_JOB_RUNNER_H_
#define LOCKSTEP_WORKER_JOB_RUNNER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/assignment_handler.h"
#include "worker/job_executor.h"

namespace lockstep {
namespace worker {

class JobRunner final : public AssignmentHandler {
 public:
  // `options` is the template for every executor (client, devices, transport).
  explicit JobRunner(JobExecutorOptions options, int final_report_repeats = 3);
  ~JobRunner() override;
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void Handle(const v1::Assignment& assignment) override;
  void DropAll(const std::string& reason) override;
  std::vector<v1::JobReport> Reports() override;
  void ReportsDelivered() override;
  std::vector<v1::JobDiagnostics> Diagnostics() override;

  // Jobs whose executor has not returned yet.
  int running() const;
  // Waits until no job runs or the deadline passes; true if none runs.
  bool WaitIdle(absl::Time deadline) const;
  // Preempts every job that has not finished (JobExecutor::Preempt: its group stops after
  // the next step with a checkpoint); returns how many it asked.
  int PreemptAll(const std::string& reason);
  // Waits until no job runs and every final report went out at least once (in a
  // heartbeat, through Reports()); true if so by the deadline.
  bool WaitReported(absl::Time deadline) const;

 private:
  using Key = std::pair<std::string, int>;  // (job_id, attempt)
  struct Job {
    std::unique_ptr<JobExecutor> executor;  // null when Create refused the partition
    std::thread thread;
    bool finished = false;
    v1::JobReport final_report;
    bool offered = false;     // the final report went out with the last Reports()
    int reported = 0;         // heartbeats that delivered the final report
    int64_t log_offered = 0;  // the last log line the last Diagnostics() carried
  };

  void Start(const v1::Partition& partition);
  void Abort(const v1::AbortJob& abort);
  // The attempt stops after its next step with a checkpoint (the worker was drained).
  void Preempt(const v1::PreemptJob& preempt);
  void Finished(const Key& key, v1::JobReport report);

  const JobExecutorOptions options_;
  const int final_report_repeats_;
  mutable absl::Mutex mu_;
  std::map<Key, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_RUNNER_H_
