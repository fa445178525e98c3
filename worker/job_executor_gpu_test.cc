// A whole job on a fake GPU, CPU-only: the digits MLP job (CSV input, Adam with warm-up and
// cosine decay, evaluation, checkpoints, summaries) through JobExecutor with ONE_DEVICE on
// /gpu:0 of fake GPUs (distribute/fake_gpu_devices.h: FakeCudaApi, the grid emulator, the
// fake BLAS) ends with the checkpoint of the same job on /cpu:0, bit for bit (the fake runs
// the CPU's arithmetic), and the same evaluation accuracy; so does a CentralStorage job that
// accumulates gradients. A job that asks for GPUs on a worker without GPU devices fails naming
// the device.
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "distribute/fake_gpu_devices.h"
#include "engine/model_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"
#include "worker/fake_worker_service_client.h"
#include "worker/job_executor.h"
#include "worker/partition_group.h"
#include "worker/worker_metrics.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

v1::JobSpec DigitsOnOneDevice(const std::string& name, bool gpus) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_strategy(v1::ONE_DEVICE);
  spec.set_gpus(gpus);
  auto model = engine::ParseModelSpecJson(ReadText("examples/digits_mlp.json"));
  EXPECT_TRUE(model.ok()) << model.status();
  *spec.mutable_model() = *model;
  auto optimizer = engine::ParseOptimizerSpecJson(ReadText("examples/digits_optimizer.json"));
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  *spec.mutable_optimizer() = *optimizer;
  v1::DataSource* train = spec.mutable_data()->mutable_train();
  train->add_files("examples/data/digits.csv.gz");
  train->set_format(v1::DataSource::CSV);
  train->set_feature_scale(0.0625f);
  spec.mutable_data()->set_eval_fraction(0.2);
  spec.set_global_batch_size(32);
  spec.set_epochs(4);
  spec.set_eval_every_steps(100);
  spec.mutable_checkpoint()->set_dir(TempDir(name + "/ckpt"));
  spec.mutable_checkpoint()->set_every_steps(100);
  spec.mutable_summaries()->set_dir(TempDir(name + "/tb"));
  spec.mutable_summaries()->set_every_steps(20);
  spec.mutable_communication()->set_timeout_ms(20000);
  spec.set_seed(7);
  return spec;
}

v1::Partition OneWorker(const v1::JobSpec& spec) {
  v1::Partition p;
  p.set_job_id(spec.name());
  *p.mutable_spec() = spec;
  SetWorkerGroup({"127.0.0.1:2000"}, 0, &p);
  p.add_replica_ids(0);
  p.set_num_replicas_in_sync(1);
  p.set_num_shards(1);
  p.set_rendezvous_prefix(absl::StrCat("jobs/", spec.name(), "/0"));
  p.set_secret("0123456789abcdef");
  absl::StatusOr<v1::JobPlan> plan =
      jobspec::LowerJobSpec(spec, jobspec::ClusterFacts::OneWorker(1, spec.gpus()));
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) *p.mutable_plan() = *plan;
  return p;
}

// Runs the job; `on_step(step, report)` sees the report as it stood when `step` ended (the
// figures of the summary window before it).
v1::JobReport RunJob(const v1::JobSpec& spec, const distribute::LocalDevices& devices,
                     WorkerMetrics* metrics = nullptr,
                     std::function<void(int64_t, const v1::JobReport&)> on_step = nullptr) {
  FakeWorkerServiceClient client;
  JobExecutorOptions options;
  options.client = &client;
  options.devices = devices;
  options.rendezvous_timeout = absl::Seconds(20);
  options.metrics = metrics;
  JobExecutor* executor = nullptr;
  if (on_step) {
    options.on_step = [&](int64_t step, const distribute::TrainStepResult&) {
      on_step(step, executor->report());
    };
  }
  auto e = JobExecutor::Create(OneWorker(spec), options);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return {};
  executor = e->get();
  return (*e)->Run();
}

// A worker's local devices with one fake GPU, /gpu:0 (the set keeps its fake API alive).
absl::StatusOr<distribute::LocalDevices> OneFakeGpu() {
  absl::StatusOr<distribute::FakeGpus> gpus = distribute::MakeFakeGpus(1);
  if (!gpus.ok()) return gpus.status();
  distribute::LocalDevices devices;
  devices.num_gpus = 1;
  devices.gpus = gpus->devices;
  return devices;
}

// The latest checkpoints in `got_dir` and `want_dir` hold the same step, variables and
// optimizer slots, bit for bit.
void ExpectSameLatestCheckpoint(const std::string& got_dir, const std::string& want_dir) {
  auto g = checkpoint::CheckpointManager::RestoreLatest(got_dir);
  auto c = checkpoint::CheckpointManager::RestoreLatest(want_dir);
  ASSERT_TRUE(g.ok() && c.ok());
  EXPECT_EQ(g->checkpoint.global_step(), c->checkpoint.global_step());
  ASSERT_EQ(g->checkpoint.variables_size(), c->checkpoint.variables_size());
  ASSERT_GT(c->checkpoint.variables_size(), 0);
  for (int i = 0; i < c->checkpoint.variables_size(); ++i) {
    EXPECT_EQ(g->checkpoint.variables(i).SerializeAsString(),
              c->checkpoint.variables(i).SerializeAsString())
        << c->checkpoint.variables(i).name();
  }
  ASSERT_EQ(g->checkpoint.optimizer_slots_size(), c->checkpoint.optimizer_slots_size());
  for (int i = 0; i < c->checkpoint.optimizer_slots_size(); ++i) {
    EXPECT_EQ(g->checkpoint.optimizer_slots(i).SerializeAsString(),
              c->checkpoint.optimizer_slots(i).SerializeAsString())
        << c->checkpoint.optimizer_slots(i).name();
  }
}

TEST(JobExecutorGpu, DigitsJobOnAFakeGpuEndsWithTheCpuCheckpointBitForBit) {
  absl::StatusOr<distribute::LocalDevices> with_gpu = OneFakeGpu();
  ASSERT_TRUE(with_gpu.ok()) << with_gpu.status();
  const v1::JobSpec gpu_spec = DigitsOnOneDevice("gpu-job", /*gpus=*/true);
  const v1::JobReport gpu = RunJob(gpu_spec, *with_gpu);
  ASSERT_EQ(gpu.phase(), v1::JobReport::DONE) << gpu.error();
  const v1::JobSpec cpu_spec = DigitsOnOneDevice("cpu-job", /*gpus=*/false);
  const v1::JobReport cpu = RunJob(cpu_spec, distribute::LocalDevices{});
  ASSERT_EQ(cpu.phase(), v1::JobReport::DONE) << cpu.error();

  EXPECT_EQ(gpu.step(), cpu.step());
  EXPECT_EQ(gpu.eval_accuracy(), cpu.eval_accuracy());
  EXPECT_GE(gpu.eval_accuracy(), 0.9);
  ExpectSameLatestCheckpoint(gpu_spec.checkpoint().dir(), cpu_spec.checkpoint().dir());
  // The variables and Adam's slots lived in the fake GPU's memory, and the report says how
  // much; a CPU job reports no device memory.
  EXPECT_GT(with_gpu->gpus->Find(0)->context->allocator_stats().peak_bytes_in_use, 0u);
  ASSERT_EQ(gpu.device_memory_size(), 1);
  EXPECT_EQ(gpu.device_memory(0).device(), "/gpu:0");
  EXPECT_GT(gpu.device_memory(0).peak_bytes(), 0u);
  EXPECT_EQ(cpu.device_memory_size(), 0);
}

// Every summary window's report carries /gpu:0's memory since the job started: a positive
// peak, reserved bytes at least that, and the caching allocator's promise: after the first
// step no device allocation is made and the peak does not grow. lockstepd's gauges say the
// same. A later job on the same device reports its own figures, not the first one's.
TEST(JobExecutorGpu, ReportsTheGpuPeakWhichStopsGrowingAfterTheFirstStep) {
  absl::StatusOr<distribute::LocalDevices> with_gpu = OneFakeGpu();
  ASSERT_TRUE(with_gpu.ok()) << with_gpu.status();
  v1::JobSpec spec = DigitsOnOneDevice("gpu-memory", /*gpus=*/true);
  spec.set_epochs(0);
  spec.set_steps(12);
  spec.mutable_summaries()->set_every_steps(1);
  MetricsRegistry registry;
  WorkerMetrics metrics(&registry);
  std::map<int64_t, v1::DeviceMemory> after;  // by the step the report's window ended at
  const v1::JobReport last =
      RunJob(spec, *with_gpu, &metrics, [&](int64_t, const v1::JobReport& r) {
        if (r.device_memory_size() == 1) after[r.step()] = r.device_memory(0);
      });
  ASSERT_EQ(last.phase(), v1::JobReport::DONE) << last.error();
  ASSERT_EQ(last.device_memory_size(), 1);
  const v1::DeviceMemory& final_memory = last.device_memory(0);
  EXPECT_EQ(final_memory.device(), "/gpu:0");
  EXPECT_GT(final_memory.peak_bytes(), 0u);
  EXPECT_GE(final_memory.reserved_bytes(), final_memory.peak_bytes());
  EXPECT_GT(final_memory.device_allocations(), 0);
  // Steps 1..11 seen from the next step's on_step.
  ASSERT_EQ(after.size(), 11u);
  for (const auto& [step, m] : after) {
    SCOPED_TRACE(absl::StrCat("report after step ", step));
    EXPECT_EQ(m.device(), "/gpu:0");
    EXPECT_EQ(m.device_allocations(), final_memory.device_allocations());
    EXPECT_EQ(m.peak_bytes(), final_memory.peak_bytes());
  }
  EXPECT_LE(final_memory.peak_bytes(),
            with_gpu->gpus->Find(0)->context->allocator_stats().peak_bytes_in_use);
  EXPECT_THAT(registry.TextFormat(),
              HasSubstr(absl::StrCat("lockstep_worker_gpu_peak_bytes{device=\"/gpu:0\"} ",
                                     final_memory.peak_bytes())));

  // A smaller job next on the same device: its peak is its own (smaller: the cache the first
  // job left counts as reserved, not in use), and its device allocations too (its variables'
  // and Adam's blocks come from that cache).
  spec.set_name("gpu-memory-smaller");
  spec.set_global_batch_size(8);
  spec.mutable_checkpoint()->set_dir(TempDir("gpu-memory-smaller/ckpt"));
  spec.mutable_summaries()->set_dir(TempDir("gpu-memory-smaller/tb"));
  const v1::JobReport smaller = RunJob(spec, *with_gpu);
  ASSERT_EQ(smaller.phase(), v1::JobReport::DONE) << smaller.error();
  ASSERT_EQ(smaller.device_memory_size(), 1);
  EXPECT_GT(smaller.device_memory(0).peak_bytes(), 0u);
  EXPECT_LT(smaller.device_memory(0).peak_bytes(), final_memory.peak_bytes());
  EXPECT_GE(smaller.device_memory(0).reserved_bytes(), final_memory.reserved_bytes());
  EXPECT_LT(smaller.device_memory(0).device_allocations(), final_memory.device_allocations());
}

// CentralStorage with gradient accumulation (K = 2) on the fake /gpu:0 through the job path
// (lowering, the worker's strategy, the trainer): the same checkpoint as on /cpu:0, bit for
// bit; the variables stayed on the host (the device held only the replica's buffers and the
// step's tensors).
TEST(JobExecutorGpu, CentralStorageAccumulatingJobOnAFakeGpuEndsWithTheCpuCheckpoint) {
  absl::StatusOr<distribute::LocalDevices> with_gpu = OneFakeGpu();
  ASSERT_TRUE(with_gpu.ok()) << with_gpu.status();
  auto central = [](const std::string& name, bool gpus) {
    v1::JobSpec spec = DigitsOnOneDevice(name, gpus);
    spec.set_strategy(v1::CENTRAL_STORAGE);
    spec.mutable_optimizer()->set_gradient_accumulation_steps(2);
    spec.set_epochs(0);
    spec.set_steps(30);
    return spec;
  };
  const v1::JobSpec gpu_spec = central("central-gpu-job", /*gpus=*/true);
  const v1::JobReport gpu = RunJob(gpu_spec, *with_gpu);
  ASSERT_EQ(gpu.phase(), v1::JobReport::DONE) << gpu.error();
  const v1::JobSpec cpu_spec = central("central-cpu-job", /*gpus=*/false);
  const v1::JobReport cpu = RunJob(cpu_spec, distribute::LocalDevices{});
  ASSERT_EQ(cpu.phase(), v1::JobReport::DONE) << cpu.error();
  EXPECT_EQ(gpu.step(), 30);
  EXPECT_EQ(gpu.step(), cpu.step());
  EXPECT_EQ(gpu.eval_accuracy(), cpu.eval_accuracy());
  ExpectSameLatestCheckpoint(gpu_spec.checkpoint().dir(), cpu_spec.checkpoint().dir());
  auto g = checkpoint::CheckpointManager::RestoreLatest(gpu_spec.checkpoint().dir());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->checkpoint.global_step(), 30);
  // The replica computed on the device.
  EXPECT_GT(with_gpu->gpus->Find(0)->context->allocator_stats().peak_bytes_in_use, 0u);
}

TEST(JobExecutorGpu, AGpuJobOnAWorkerWithoutGpuDevicesFailsNamingTheDevice) {
  distribute::LocalDevices no_handles;
  no_handles.num_gpus = 1;  // registered, but no engine devices built
  const v1::JobReport r = RunJob(DigitsOnOneDevice("no-handles", /*gpus=*/true), no_handles);
  EXPECT_EQ(r.phase(), v1::JobReport::FAILED);
  EXPECT_THAT(r.error(), HasSubstr("/gpu:0"));
}

}  // namespace
}  // namespace lockstep::worker
