// Small helpers shared by the files of JobService (job_service*.cc); not part of its API.
#ifndef LOCKSTEP_COORDINATOR_JOB_SERVICE_INTERNAL_H_
#define LOCKSTEP_COORDINATOR_JOB_SERVICE_INTERNAL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job_attempt.h"
#include "coordinator/scheduler.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job.pb.h"

namespace lockstep {
namespace coordinator {
namespace job_service_internal {

// The membership snapshot by task.
inline std::map<TaskRef, const v1::TaskStatus*> ByRef(const std::vector<v1::TaskStatus>& tasks) {
  std::map<TaskRef, const v1::TaskStatus*> by_ref;
  for (const v1::TaskStatus& t : tasks) by_ref[RefOf(t)] = &t;
  return by_ref;
}

inline v1::JobProgress ProgressOf(const v1::JobReport& r) {
  v1::JobProgress p;
  p.set_step(r.step());
  p.set_loss(r.loss());
  p.set_examples_per_sec(r.examples_per_sec());
  p.set_busbw_gbps(r.busbw_gbps());
  p.set_total_steps(r.total_steps());
  p.set_train_accuracy(r.train_accuracy());
  p.set_eval_accuracy(r.eval_accuracy());
  p.set_learning_rate(r.learning_rate());
  p.set_epoch(r.epoch());
  p.set_checkpoint_path(r.checkpoint_path());
  p.set_summary_dir(r.summary_dir());
  p.set_step_ms(r.step_ms());
  p.set_compute_ms(r.compute_ms());
  p.set_allreduce_wait_ms(r.allreduce_wait_ms());
  p.set_apply_ms(r.apply_ms());
  p.set_restored_step(r.restored_step());
  *p.mutable_device_memory() = r.device_memory();
  return p;
}

// How the store keeps an attempt's worker (or evaluator) for a restarted coordinator.
inline v1::AttemptWorkerRecord RecordOf(const AttemptWorker& w) {
  v1::AttemptWorkerRecord r;
  r.set_task_type(w.task.type);
  r.set_task_index(w.task.index);
  r.set_incarnation(w.incarnation);
  return r;
}

// The reason a job enters RESTARTING with: what failed, and which restart this is.
inline std::string RestartReason(const std::string& failure, const v1::JobRecord& record,
                                 int max_restarts) {
  return absl::StrCat(failure, "; restarting from the newest checkpoint (restart ",
                      record.restarts() + 1, " of ", max_restarts, ")");
}

// What a FAILED reason adds when the restart policy allowed restarts.
inline std::string NoRestartsLeft(int restarts, int max_restarts) {
  if (max_restarts <= 0) return "";
  return absl::StrCat(" (no restart left: ", restarts, " of restart_policy.max_restarts ",
                      max_restarts, " used)");
}

}  // namespace job_service_internal
}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_SERVICE_INTERNAL_H_
