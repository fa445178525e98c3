// A whole job on a fake GPU, CPU-only: the digits MLP job (CSV input, Adam with warm-up and
// cosine decay, evaluation, checkpoints, summaries) through JobExecutor with ONE_DEVICE on
// /gpu:0 of fake GPUs (distribute/fake_gpu_devices.h: FakeCudaApi, the grid emulator, the
// fake BLAS) ends with the checkpoint of the same job on /cpu:0, bit for bit (the fake runs
// the CPU's arithmetic), and the same evaluation accuracy. A job that asks for GPUs on a
// worker without GPU devices fails naming the device.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "distribute/fake_gpu_devices.h"
#include "engine/model_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/chief/checkpoint.h"
#include "worker/fake_coordinator_client.h"
#include "worker/job_executor.h"

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
  p.set_tf_config(R"({"cluster": {"worker": ["127.0.0.1:2000"]}, "task": {"type": "worker", "index": 0}})");
  p.mutable_task()->set_type("worker");
  p.set_worker_rank(0);
  p.set_num_workers(1);
  p.set_is_chief(true);
  p.add_replica_ids(0);
  p.set_num_replicas_in_sync(1);
  p.set_num_shards(1);
  p.set_rendezvous_prefix(absl::StrCat("jobs/", spec.name(), "/0"));
  p.set_secret("0123456789abcdef");
  return p;
}

v1::JobReport RunJob(const v1::JobSpec& spec, const distribute::LocalDevices& devices) {
  FakeCoordinatorClient client;
  JobExecutorOptions options;
  options.client = &client;
  options.devices = devices;
  options.rendezvous_timeout = absl::Seconds(20);
  auto e = JobExecutor::Create(OneWorker(spec), options);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return {};
  return (*e)->Run();
}

TEST(JobExecutorGpu, DigitsJobOnAFakeGpuEndsWithTheCpuCheckpointBitForBit) {
  absl::StatusOr<distribute::FakeGpus> gpus = distribute::MakeFakeGpus(1);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  distribute::LocalDevices with_gpu;
  with_gpu.num_gpus = 1;
  with_gpu.gpus = gpus->devices;
  const v1::JobSpec gpu_spec = DigitsOnOneDevice("gpu-job", /*gpus=*/true);
  const v1::JobReport gpu = RunJob(gpu_spec, with_gpu);
  ASSERT_EQ(gpu.phase(), v1::JobReport::DONE) << gpu.error();
  const v1::JobSpec cpu_spec = DigitsOnOneDevice("cpu-job", /*gpus=*/false);
  const v1::JobReport cpu = RunJob(cpu_spec, distribute::LocalDevices{});
  ASSERT_EQ(cpu.phase(), v1::JobReport::DONE) << cpu.error();

  EXPECT_EQ(gpu.step(), cpu.step());
  EXPECT_EQ(gpu.eval_accuracy(), cpu.eval_accuracy());
  EXPECT_GE(gpu.eval_accuracy(), 0.9);
  auto g = chief::CheckpointManager::RestoreLatest(gpu_spec.checkpoint().dir());
  auto c = chief::CheckpointManager::RestoreLatest(cpu_spec.checkpoint().dir());
  ASSERT_TRUE(g.ok() && c.ok());
  EXPECT_EQ(g->checkpoint.global_step(), c->checkpoint.global_step());
  ASSERT_EQ(g->checkpoint.variables_size(), c->checkpoint.variables_size());
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
  // The variables and Adam's slots lived in the fake GPU's memory.
  EXPECT_GT(gpus->devices->Find(0)->context->allocator_stats().peak_bytes_in_use, 0u);
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
