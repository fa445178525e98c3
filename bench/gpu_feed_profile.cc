// bench/gpu_feed_profile: where a GPU training step's host time goes, on CPU machines. A real
// JobExecutor trains an MLP (--input-->--hidden-->10, batch --batch, SGD, synthetic data)
// as bench/train_throughput --device=gpu --workers=1 runs it (MultiWorkerMirrored, one worker,
// its replica on /gpu:0, gradients all-reduced in device memory over NCCL), here on a fake GPU
// (distribute/fake_gpu_devices.h: FakeCudaApi, the grid emulator, the fake BLAS) and the fake
// NCCL over its device memory, and prints per measured step, from the job's own timing
// (distribute::StepTimes, the phases lockstepd exports as step_phase_seconds, and the input
// wait before each step):
//   the period between steps = the step (compute, all-reduce wait, apply, other)
//                              + the time outside it (input wait, the loop's own);
// and from FakeCudaApi's counters what a GPU would make slow: the host's waits for the device
// and the host<->device copies of pageable memory (staged and waited for by the driver) and
// of pinned memory (asynchronous), per step. The fake runs the "device" work on the host when
// it synchronises, inside the step, so the period here is not a GPU's; the counters and the
// time outside the step are what this measures.
// --profile_ops: the per-op table of engine/gpu/op_profiler.h over the measured steps, as
// bench/train_throughput --profile_ops prints it on a GPU; on the fake each cell counts the
// stream work (kernel launches, copies, memsets, event waits) of that op per step: the list
// the next GPU run's milliseconds line up against (bench/gpu_runs.md).
//   bazel run //bench:gpu_feed_profile -- --steps=30 --prefetch_to_device=false
//   bazel run //bench:gpu_feed_profile -- --hidden_layers=2 --profile_ops --steps=3 --batch=64
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "common/cuda/fake_cuda_api.h"
#include "distribute/fake_gpu_devices.h"
#include "engine/gpu/op_profiler.h"
#include "jobspec/lower.h"
#include "worker/fake_worker_service_client.h"
#include "worker/job_executor.h"
#include "worker/partition_group.h"

ABSL_FLAG(int, steps, 30, "measured steps");
ABSL_FLAG(int, warmup, 5, "steps before measuring");
ABSL_FLAG(int, batch, 256, "global batch");
ABSL_FLAG(int, input, 4096, "features per example");
ABSL_FLAG(int, hidden, 64, "hidden units");
ABSL_FLAG(int, hidden_layers, 1, "hidden dense+relu layers (2: train_throughput's mlp_4096)");
ABSL_FLAG(bool, profile_ops, false, "print the per-op table (stream work counted per op)");
ABSL_FLAG(bool, prefetch_to_device, true,
          "stage the batches on the device ahead of the steps (false: the host feed path)");

namespace lockstep {
namespace {

int Main() {
  const int warmup = absl::GetFlag(FLAGS_warmup), steps = absl::GetFlag(FLAGS_steps);
  v1::Partition p;
  p.set_job_id("gpu-feed-profile");
  v1::JobSpec* spec = p.mutable_spec();
  spec->set_strategy(v1::MULTI_WORKER_MIRRORED);
  spec->set_gpus(true);
  v1::ModelSpec* m = spec->mutable_model();
  m->add_input_shape(absl::GetFlag(FLAGS_input));
  m->set_seed(1);
  m->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  for (int l = 0; l < absl::GetFlag(FLAGS_hidden_layers); ++l) {
    m->add_layers()->mutable_dense()->set_units(absl::GetFlag(FLAGS_hidden));
    m->add_layers()->mutable_relu();
  }
  m->add_layers()->mutable_dense()->set_units(10);
  spec->mutable_optimizer()->mutable_sgd();
  spec->mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.01);
  spec->mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec->mutable_data()->mutable_train()->set_synthetic_examples(absl::GetFlag(FLAGS_batch));
  spec->set_global_batch_size(absl::GetFlag(FLAGS_batch));
  spec->set_steps(warmup + steps);
  spec->mutable_summaries()->set_every_steps(warmup + steps);
  spec->set_seed(5);
  worker::SetWorkerGroup({"127.0.0.1:1"}, 0, &p);
  p.set_num_replicas_in_sync(1);
  p.set_num_shards(1);
  p.set_rendezvous_prefix("profile");
  p.set_secret("profile-secret-0");
  // Lowered as the coordinator lowers a submitted job: one worker with one GPU.
  jobspec::ClusterFacts facts;
  facts.workers.assign(1, jobspec::WorkerFacts{1, 1});
  absl::StatusOr<v1::JobPlan> plan = jobspec::LowerJobSpec(*spec, facts);
  if (!plan.ok()) return std::fprintf(stderr, "%s\n", plan.status().ToString().c_str()), 1;
  *p.mutable_plan() = *std::move(plan);

  absl::StatusOr<distribute::FakeGpus> gpus = distribute::MakeFakeGpus(1, size_t{512} << 20);
  if (!gpus.ok()) return std::fprintf(stderr, "%s\n", gpus.status().ToString().c_str()), 1;
  worker::FakeWorkerServiceClient client;
  worker::JobExecutorOptions options;
  options.client = &client;
  options.devices.num_gpus = 1;
  options.devices.gpus = gpus->devices;
  collectives::nccl::FakeNcclWorld world;
  world.UseDeviceMemory(gpus->api.get());
  collectives::nccl::FakeNcclApi nccl(&world);
  options.nccl.api = &nccl;
  options.prefetch_to_device = absl::GetFlag(FLAGS_prefetch_to_device);
  engine::gpu::OpProfiler* profiler = nullptr;
  if (absl::GetFlag(FLAGS_profile_ops)) {
    absl::StatusOr<engine::gpu::OpProfiler*> made = gpus->devices->StartProfiling(0);
    if (!made.ok()) return std::fprintf(stderr, "%s\n", made.status().ToString().c_str()), 1;
    profiler = *made;
  }
  absl::Status profile_status;
  absl::Time start, end;
  FakeCudaApi::Counters first, last;
  distribute::StepTimes sum;
  options.on_step = [&](int64_t step, const distribute::TrainStepResult& r) {
    if (step == warmup) {
      if (profiler != nullptr) profile_status.Update(profiler->Reset());
      start = absl::Now();
      first = gpus->api->counters();
    }
    if (step > warmup) sum += r.times;
    if (step == warmup + steps) {
      end = absl::Now();
      last = gpus->api->counters();
    }
  };
  auto executor = worker::JobExecutor::Create(p, options);
  if (!executor.ok()) return std::fprintf(stderr, "%s\n", executor.status().ToString().c_str()), 1;
  const v1::JobReport report = (*executor)->Run();
  if (report.phase() != v1::JobReport::DONE) {
    return std::fprintf(stderr, "the job failed: %s\n", report.error().c_str()), 1;
  }
  auto ms = [&](absl::Duration d) { return absl::ToDoubleMilliseconds(d) / steps; };
  const double period = ms(end - start), step = ms(sum.total), wait = ms(sum.input_wait);
  std::printf(
      "gpu_feed_profile: MLP %d-%dx%d-10, batch %d (%.2f MiB of features a step), fake /gpu:0 "
      "(MultiWorkerMirrored, 1 worker, fake NCCL), prefetch_to_device=%s; %d measured steps after "
      "%d\n",
      absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_hidden), absl::GetFlag(FLAGS_hidden_layers),
      absl::GetFlag(FLAGS_batch),
      absl::GetFlag(FLAGS_batch) * absl::GetFlag(FLAGS_input) * 4.0 / 1048576,
      options.prefetch_to_device ? "true" : "false", steps, warmup);
  std::printf(
      "per step: period %.2f ms = step %.2f ms (compute %.2f, all-reduce wait %.2f, apply %.2f, "
      "other %.2f) + outside the step %.2f ms (input wait %.2f, the loop %.2f)\n",
      period, step, ms(sum.compute), ms(sum.allreduce_wait), ms(sum.apply),
      step - ms(sum.compute) - ms(sum.allreduce_wait) - ms(sum.apply), period - step, wait,
      period - step - wait);
  const double n = steps;
  std::printf(
      "per step on the device API: %.2f host waits; pageable copies %.2f (%.3f MiB); pinned "
      "copies %.2f (%.3f MiB)\n",
      (last.host_waits - first.host_waits) / n, (last.pageable_copies - first.pageable_copies) / n,
      (last.pageable_copy_bytes - first.pageable_copy_bytes) / n / 1048576,
      (last.pinned_copies - first.pinned_copies) / n,
      (last.pinned_copy_bytes - first.pinned_copy_bytes) / n / 1048576);
  if (profiler != nullptr) {
    absl::StatusOr<engine::gpu::OpProfiler::Profile> profile = profiler->Finish();
    profile_status.Update(profile.status());
    if (!profile_status.ok()) {
      return std::fprintf(stderr, "--profile_ops: %s\n", profile_status.ToString().c_str()), 1;
    }
    std::printf("stream work per op and step (the fake's timing events count it):\n%s",
                engine::gpu::OpProfiler::Table(*profile, "launches").c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return lockstep::Main();
}
