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

#include "coordinator/membership.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace coordinator {

// A task of the training group: type "worker" or "chief".
bool IsTrainingTask(const v1::TaskStatus& task);
TaskRef RefOf(const v1::TaskStatus& task);
// Workers a job's spec asks for: num_workers, or 1 for the one-worker strategies; 0 means
// "every ALIVE training worker" (MULTI_WORKER_MIRRORED without num_workers).
int WorkersNeeded(const v1::JobSpec& spec);

// The workers an attempt gets: `needed` idle ALIVE training workers in membership order
// (task order), or with `needed` 0 every ALIVE training worker, all of which must be idle.
// A drained worker (TaskStatus.draining) counts as neither.
// nullopt when not enough are idle: the job waits.
std::optional<std::vector<const v1::TaskStatus*>> ChooseWorkers(
    int needed, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy);

class Scheduler {
 public:
  // Queues `id`. `workers` > 0: its next attempt needs exactly that many (a restart keeps
  // the group configuration of the attempt it replaces); 0: its spec decides.
  void Enqueue(const std::string& id, int workers = 0);
  void Remove(const std::string& id);
  bool empty() const { return queue_.empty(); }
  // The queued ids, oldest first.
  std::vector<std::string> Queue() const { return {queue_.begin(), queue_.end()}; }
  // How many workers the next attempt of `id` needs (see Enqueue; 0: every ALIVE one).
  int WorkersFor(const std::string& id, const v1::JobSpec& spec) const;

 private:
  std::set<std::string> queue_;
  std::map<std::string, int> workers_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SCHEDULER_H_
