#include "coordinator/scheduler.h"

#include <algorithm>

namespace lockstep {
namespace coordinator {

bool IsTrainingTask(const v1::TaskStatus& task) {
  return task.task().type() == "worker" || task.task().type() == "chief";
}

TaskRef RefOf(const v1::TaskStatus& task) {
  return TaskRef{task.task().type(), task.task().index()};
}

Schedulable SchedulableWorkers(const std::vector<v1::TaskStatus>& tasks,
                               const std::function<bool(const TaskRef&)>& busy) {
  Schedulable out;
  for (const v1::TaskStatus& t : tasks) {
    if (t.state() != v1::ALIVE || !IsTrainingTask(t) || t.draining()) continue;
    out.alive.push_back(&t);
    if (!busy(RefOf(t))) out.idle.push_back(&t);
  }
  return out;
}

std::optional<std::vector<const v1::TaskStatus*>> ChooseWorkers(
    int needed, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy) {
  auto [alive, idle] = SchedulableWorkers(tasks, busy);
  if (needed == 0) {
    if (alive.empty() || idle.size() != alive.size()) return std::nullopt;
    return idle;
  }
  if (static_cast<int>(idle.size()) < needed) return std::nullopt;
  idle.resize(needed);
  return idle;
}

int ReplicasOn(const v1::TaskStatus& task, const v1::DevicePlan& devices) {
  if (devices.per_worker() > 0) return devices.per_worker();
  const bool gpus = devices.kind() == v1::DevicePlan::GPU;
  int n = 0;  // a device of no stated kind counts as a CPU device
  for (const v1::Device& d : task.devices()) n += (d.kind() == v1::Device::GPU) == gpus ? 1 : 0;
  return std::max(1, n);
}

std::optional<std::vector<const v1::TaskStatus*>> ChooseElastic(
    int most, int least, int64_t global_batch, const std::vector<v1::TaskStatus>& tasks,
    const std::function<bool(const TaskRef&)>& busy, const v1::DevicePlan& devices) {
  std::vector<const v1::TaskStatus*> idle = SchedulableWorkers(tasks, busy).idle;
  for (int c = std::min<int>(most, idle.size()); c >= std::max(1, least); --c) {
    int64_t replicas = 0;
    for (int i = 0; i < c; ++i) replicas += ReplicasOn(*idle[i], devices);
    if (global_batch % replicas == 0) {
      idle.resize(c);
      return idle;
    }
  }
  return std::nullopt;
}

void Scheduler::Enqueue(const std::string& id, WorkerNeed need) {
  queue_.insert(id);
  needs_[id] = need;
}

void Scheduler::Remove(const std::string& id) {
  queue_.erase(id);
  needs_.erase(id);
}

WorkerNeed Scheduler::NeedFor(const std::string& id, const v1::JobPlan& plan) const {
  auto it = needs_.find(id);
  WorkerNeed need = it != needs_.end() ? it->second : WorkerNeed{};
  if (need.workers == 0) need.workers = plan.workers();
  return need;
}

}  // namespace coordinator
}  // namespace lockstep
