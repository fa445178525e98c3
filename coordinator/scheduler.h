// Scheduler: the jobs waiting for workers (PENDING, and RESTARTING between two attempts),
// tried oldest first (job ids sort by submission), and the choice of workers for an
// attempt. A job that cannot start holds back the ones behind it, so a large job is not
// starved by small ones. Pure bookkeeping over a membership snapshot; the JobService
// holds it under its mutex.
#ifndef LOCKSTEP_COORDINATOR_SCHEDULER_H_
#define LOCKSTEP_COORDINATOR_SCHEDULER_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/membership.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job_plan.pb.h"

namespace lockstep {
namespace coordinator {

// A task of the training group: type "worker" or "chief".
bool IsTrainingTask(const v1::TaskStatus& task);
TaskRef RefOf(const v1::TaskStatus& task);

// The ALIVE training workers that are not drained, and those of them not `busy`, in task
// order: what every choice below picks from.
struct Schedulable {
  std::vector<const v1::TaskStatus*> alive;
  std::vector<const v1::TaskStatus*> idle;
};
Schedulable SchedulableWorkers(const std::vector<v1::TaskStatus>& tasks,
                               const std::function<bool(const TaskRef&)>& busy);

// The workers an attempt gets: `needed` idle ALIVE training workers in membership order
// (task order), or with `needed` 0 every ALIVE training worker, all of which must be idle.
// A drained worker (TaskStatus.draining) counts as neither.
// nullopt when not enough are idle: the job waits.
std::optional<std::vector<const v1::TaskStatus*>> ChooseWorkers(
    int needed, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy);

// The replicas a job whose plan puts them on `devices` runs on `task`: the plan's count per
// worker (1 for ONE_DEVICE), or one per device of the plan's kind (its GPUs, else its CPU
// devices; a GPU host registers both), at least 1.
int ReplicasOn(const v1::TaskStatus& task, const v1::DevicePlan& devices);

// Elastic: the most idle ALIVE training workers, between `least` and `most`, whose replicas
// (ReplicasOn) divide `global_batch`; nullopt when no such count is idle.
std::optional<std::vector<const v1::TaskStatus*>> ChooseElastic(
    int most, int least, int64_t global_batch, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy, const v1::DevicePlan& devices);

// What the next attempt of a queued job needs.
struct WorkerNeed {
  // Exactly this many workers (a restart keeps the group configuration of the attempt it
  // replaces); 0: the job's plan decides (JobPlan.workers).
  int workers = 0;
  // Elastic (restart_policy.min_workers > 0): from `shrink_after` on, any usable count from
  // min_workers up to `workers` will do (ChooseElastic).
  int min_workers = 0;
  absl::Time shrink_after = absl::InfiniteFuture();
  // Not before then (a restart backing off after attempts that failed quickly).
  absl::Time not_before = absl::InfinitePast();
};

class Scheduler {
 public:
  // Queues `id` with what its next attempt needs.
  void Enqueue(const std::string& id, WorkerNeed need = {});
  void Remove(const std::string& id);
  bool empty() const { return queue_.empty(); }
  // The queued ids, oldest first.
  std::vector<std::string> Queue() const { return {queue_.begin(), queue_.end()}; }
  // What the next attempt of `id` needs: what Enqueue said, with `workers` 0 replaced by the
  // plan's count (0 still: every ALIVE worker).
  WorkerNeed NeedFor(const std::string& id, const v1::JobPlan& plan) const;

 private:
  std::set<std::string> queue_;
  std::map<std::string, WorkerNeed> needs_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SCHEDULER_H_
