#include "coordinator/scheduler.h"

#include "coordinator/job_validation.h"

namespace lockstep {
namespace coordinator {

bool IsTrainingTask(const v1::TaskStatus& task) {
  return task.task().type() == "worker" || task.task().type() == "chief";
}

TaskRef RefOf(const v1::TaskStatus& task) {
  return TaskRef{task.task().type(), task.task().index()};
}

int WorkersNeeded(const v1::JobSpec& spec) {
  if (spec.num_workers() > 0) return spec.num_workers();
  return EffectiveStrategy(spec) == v1::MULTI_WORKER_MIRRORED ? 0 : 1;
}

std::optional<std::vector<const v1::TaskStatus*>> ChooseWorkers(
    int needed, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy) {
  std::vector<const v1::TaskStatus*> alive, idle;
  for (const v1::TaskStatus& t : tasks) {
    if (t.state() != v1::ALIVE || !IsTrainingTask(t) || t.draining()) continue;
    alive.push_back(&t);
    if (!busy(RefOf(t))) idle.push_back(&t);
  }
  if (needed == 0) {
    if (alive.empty() || idle.size() != alive.size()) return std::nullopt;
    return idle;
  }
  if (static_cast<int>(idle.size()) < needed) return std::nullopt;
  idle.resize(needed);
  return idle;
}

void Scheduler::Enqueue(const std::string& id, int workers) {
  queue_.insert(id);
  if (workers > 0) {
    workers_[id] = workers;
  } else {
    workers_.erase(id);
  }
}

void Scheduler::Remove(const std::string& id) {
  queue_.erase(id);
  workers_.erase(id);
}

int Scheduler::WorkersFor(const std::string& id, const v1::JobSpec& spec) const {
  auto it = workers_.find(id);
  return it != workers_.end() ? it->second : WorkersNeeded(spec);
}

}  // namespace coordinator
}  // namespace lockstep
