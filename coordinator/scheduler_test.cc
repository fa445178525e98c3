#include "coordinator/scheduler.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

v1::TaskStatus Task(const std::string& type, int index, v1::TaskState state = v1::ALIVE) {
  v1::TaskStatus s;
  s.mutable_task()->set_type(type);
  s.mutable_task()->set_index(index);
  s.set_state(state);
  return s;
}

std::vector<TaskRef> Refs(const std::optional<std::vector<const v1::TaskStatus*>>& chosen) {
  std::vector<TaskRef> out;
  for (const v1::TaskStatus* t : *chosen) out.push_back(RefOf(*t));
  return out;
}

TEST(SchedulerTest, ChoosesIdleAliveTrainingWorkersInTaskOrder) {
  const std::vector<v1::TaskStatus> tasks = {Task("chief", 0), Task("worker", 0),
                                             Task("worker", 1, v1::LOST), Task("evaluator", 0),
                                             Task("worker", 2)};
  auto none_busy = [](const TaskRef&) { return false; };
  auto chosen = ChooseWorkers(2, tasks, none_busy);
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(Refs(chosen), (std::vector<TaskRef>{{"chief", 0}, {"worker", 0}}));
  // 0: every ALIVE training worker (the evaluator and the LOST one are not).
  EXPECT_EQ(Refs(ChooseWorkers(0, tasks, none_busy)),
            (std::vector<TaskRef>{{"chief", 0}, {"worker", 0}, {"worker", 2}}));
  // A busy worker is skipped; with 0 the job waits for it.
  auto w0_busy = [](const TaskRef& t) { return t == TaskRef{"worker", 0}; };
  EXPECT_EQ(Refs(ChooseWorkers(2, tasks, w0_busy)),
            (std::vector<TaskRef>{{"chief", 0}, {"worker", 2}}));
  EXPECT_FALSE(ChooseWorkers(0, tasks, w0_busy).has_value());
  EXPECT_FALSE(ChooseWorkers(4, tasks, none_busy).has_value());
  EXPECT_FALSE(ChooseWorkers(0, {}, none_busy).has_value());
}

TEST(SchedulerTest, ADrainedWorkerIsNeverChosen) {
  std::vector<v1::TaskStatus> tasks = {Task("worker", 0), Task("worker", 1)};
  tasks[1].set_draining(true);
  auto none_busy = [](const TaskRef&) { return false; };
  EXPECT_FALSE(ChooseWorkers(2, tasks, none_busy).has_value());
  EXPECT_EQ(Refs(ChooseWorkers(0, tasks, none_busy)), (std::vector<TaskRef>{{"worker", 0}}));
}

TEST(SchedulerTest, QueuesOldestFirstAndARestartKeepsItsWorkerCount) {
  Scheduler s;
  EXPECT_TRUE(s.empty());
  s.Enqueue("job-000002");
  s.Enqueue("job-000001", WorkerNeed{3});
  EXPECT_EQ(s.Queue(), (std::vector<std::string>{"job-000001", "job-000002"}));
  v1::JobPlan every;  // MULTI_WORKER_MIRRORED without num_workers
  every.set_workers(0);
  EXPECT_EQ(s.NeedFor("job-000001", every).workers, 3);  // the attempt it replaces had 3
  EXPECT_EQ(s.NeedFor("job-000002", every).workers, 0);  // every ALIVE worker
  v1::JobPlan one;                                       // a one-worker strategy
  one.set_workers(1);
  EXPECT_EQ(s.NeedFor("job-000002", one).workers, 1);
  s.Remove("job-000001");
  EXPECT_EQ(s.Queue(), (std::vector<std::string>{"job-000002"}));
  EXPECT_EQ(s.NeedFor("job-000001", every).workers, 0);  // forgotten with it
}

// Replicas on every worker's devices of `kind` (per_worker 0), as a plan puts them.
v1::DevicePlan Every(v1::DevicePlan::Kind kind) {
  v1::DevicePlan devices;
  devices.set_kind(kind);
  return devices;
}
v1::DevicePlan Cpus() { return Every(v1::DevicePlan::CPU); }
v1::DevicePlan Gpus() { return Every(v1::DevicePlan::GPU); }

// Elastic: the most idle workers between least and most whose replicas divide the batch.
TEST(SchedulerTest, ChooseElasticTakesTheLargestUsableCount) {
  std::vector<v1::TaskStatus> tasks;
  for (int i = 0; i < 4; ++i) tasks.push_back(Task("worker", i));
  auto busy = [](const TaskRef& t) { return t.index == 3; };  // 3 idle
  // 48 over 3 replicas: all three.
  EXPECT_EQ(ChooseElastic(4, 2, 48, tasks, busy, Cpus())->size(), 3u);
  // 32 does not split over 3: two.
  EXPECT_EQ(ChooseElastic(4, 2, 32, tasks, busy, Cpus())->size(), 2u);
  // 30 splits over 3 or 2... or 1, but not below `least` and not above `most`.
  EXPECT_EQ(ChooseElastic(2, 2, 30, tasks, busy, Cpus())->size(), 2u);
  EXPECT_FALSE(ChooseElastic(4, 3, 32, tasks, busy, Cpus()).has_value());
}

// A GPU host registers its CPU devices and its GPUs: a job counts the devices of its plan's
// kind, or takes the plan's count (ONE_DEVICE: 1).
TEST(SchedulerTest, ReplicasAreTheDevicesOfTheJobsKind) {
  v1::TaskStatus gpu_host = Task("worker", 0);
  gpu_host.clear_devices();
  for (int i = 0; i < 3; ++i) gpu_host.add_devices()->set_kind(v1::Device::CPU);
  for (int i = 0; i < 2; ++i) gpu_host.add_devices()->set_kind(v1::Device::GPU);
  ASSERT_EQ(gpu_host.devices_size(), 5);
  EXPECT_EQ(ReplicasOn(gpu_host, Cpus()), 3);
  EXPECT_EQ(ReplicasOn(gpu_host, Gpus()), 2);
  v1::TaskStatus cpu_host = Task("worker", 1);
  cpu_host.clear_devices();
  cpu_host.add_devices()->set_kind(v1::Device::CPU);
  EXPECT_EQ(ReplicasOn(cpu_host, Cpus()), 1);
  EXPECT_EQ(ReplicasOn(cpu_host, Gpus()), 1);  // at least one
  v1::DevicePlan one_device = Gpus();
  one_device.set_per_worker(1);
  EXPECT_EQ(ReplicasOn(gpu_host, one_device), 1);
  // 6 over the GPU host's 2 GPUs and 2 more: both; over its 3 CPUs and 3 more: both too.
  std::vector<v1::TaskStatus> tasks = {gpu_host, gpu_host};
  tasks[1].mutable_task()->set_index(1);
  auto idle = [](const TaskRef&) { return false; };
  EXPECT_EQ(ChooseElastic(2, 1, 4, tasks, idle, Gpus())->size(), 2u);
  EXPECT_EQ(ChooseElastic(2, 1, 6, tasks, idle, Cpus())->size(), 2u);
  EXPECT_EQ(ChooseElastic(2, 1, 3, tasks, idle, Cpus())->size(), 1u);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
