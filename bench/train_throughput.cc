// bench/train_throughput: training throughput of a Lockstep job with 1 and 2 workers on this
// machine (one benchmark program, over 600 lines for its flags, variants and report). Each worker
// is a separate process (this binary, re-executed with --child_rank) running a real
// worker::JobExecutor on a MultiWorkerMirrored partition: MLP 784-1024-1024-10, global batch 256,
// f32, SGD, synthetic data, one compute thread per worker (--pin_workers: each on a CPU of its
// own), collectives over shared memory, rendezvous through a FileStore. Examples/s are measured by
// worker 0 over --steps steps after --warmup, in --runs rounds that interleave the worker counts;
// the median per worker count is printed, then the scaling ratio (goal >= 1.6x) and the 1-worker
// step time against a bare engine step (Executor::ComputeGradients + Optimizer::Apply, as
// bench/train_step; goal <= 1.1x).
//   bazel run //bench:train_throughput
//   bazel run //bench:train_throughput -- --workers=1,2 --runs=3 --steps=200 --warmup=20
//   bazel run //bench:train_throughput -- --runs=7 --compare_pinning
//   bazel run //bench:train_throughput -- --workers=2 --runs=7 --compare_compression
// --model=transformer runs bench/transformer_spec.h's Transformer (on float inputs) instead,
// global batch 16 unless --batch says otherwise; --model=mlp_4096 an MLP 4096-8192-8192-10.
// --device=gpu (a --config=cuda build on a GPU host; tagged gpu-bundle, run by
// tools/gpu_check.sh): every worker's replica on /gpu:0 (RealCudaApi, the CUDA kernels,
// cuBLASLt; NCCL between the workers), and worker 0's peak device bytes (the caching
// allocator's) are reported; the bare CPU engine step is not measured then.
//   train_throughput --device=gpu --workers=1 --runs=1 --batch=4096 --model=mlp_4096
//   train_throughput --device=gpu --workers=1 --runs=1 --batch=256 --model=transformer
// Every run also reports worker 0's period between steps against its step: the time outside
// the step (the wait for the input, the loop's own work) is what examples/s pays beyond the
// step time. --prefetch_to_device=false feeds GPU replicas host batches, copied in by each
// step, instead of batches the input pipeline staged on the device ahead of it.
// --precision=bf16_mixed sets the model's BF16_MIXED precision (f32 by default).
// --profile_ops (--device=gpu): worker 0 times its GPU stream per op with CUDA events
// (engine/gpu/op_profiler.h) over the measured steps and prints, per run, a table: each node's
// forward and backward milliseconds per step, the gradient hand-offs (the all-reduces enqueued
// there), the loss readback, the optimizer's update and the stream's time outside the step.
// The events cost host time per op (bench/gpu_runs.md): examples/s of a profiled run are not
// the figure.
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/transformer_spec.h"
#include "collectives/bench/core_latency.h"
#include "collectives/bench/peer_measurement.h"
#include "collectives/file_store.h"
#include "common/child_processes.h"
#include "common/process.h"
#include "common/sched.h"
#include "distribute/trainer.h"
#include "engine/executor.h"
#include "engine/gpu/op_profiler.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "jobspec/lower.h"
#include "worker/job_executor.h"
#include "worker/partition_group.h"
#include "worker/worker_service_client.h"
#ifdef LOCKSTEP_WITH_CUDA
#include "collectives/nccl/real_nccl_api.h"
#include "distribute/cuda_gpu_devices.h"
#endif

ABSL_FLAG(std::string, workers, "1,2", "worker counts to measure");
ABSL_FLAG(int, runs, 3, "runs per worker count (the median is reported)");
ABSL_FLAG(int, steps, 200, "measured steps per run");
ABSL_FLAG(int, warmup, 20, "steps before measuring");
ABSL_FLAG(int, batch, 0, "global batch (0: 256 for mlp, 16 for transformer)");
ABSL_FLAG(std::string, model, "mlp",
          "mlp (784-1024-1024-10) or transformer (bench/transformer_spec.h: 2 causal blocks, "
          "sequence 128, width 256, 4 heads, on [128, 256] float inputs)");
ABSL_FLAG(std::string, transport, "shm", "shm or tcp");
ABSL_FLAG(bool, overlap, true, "all-reduce during the backward pass (false: after it)");
ABSL_FLAG(int64_t, bytes_per_pack, 0,
          "JobSpec communication.bytes_per_pack: gradient fusion pack size (0: 4 MiB)");
ABSL_FLAG(bool, shm_heap, true,
          "gradients in the shm transport's zero-copy heap (false: ordinary memory)");
ABSL_FLAG(bool, compare_shm_heap, false,
          "also run every multi-worker count with --shm_heap=false in each round, and print "
          "the per-round ratio of the two");
ABSL_FLAG(std::string, compression, "none",
          "JobSpec communication.compression of the gradients: none or bf16");
ABSL_FLAG(std::string, precision, "f32",
          "model.precision: f32, or bf16_mixed (bf16 operands in the products, f32 accumulation, "
          "master weights and optimizer state; graph.proto's Precision)");
ABSL_FLAG(bool, compare_compression, false,
          "also run every multi-worker count with the other --compression in each round, and "
          "print the per-round ratio of the two");
ABSL_FLAG(bool, pin_workers, false,
          "each worker process on a CPU of its own when there are enough, as `lockstep local "
          "--pin_workers` places them (common/sched.h: CpusPerWorker)");
ABSL_FLAG(bool, compare_pinning, false,
          "also run every multi-worker count with the other --pin_workers in each round, and "
          "print the per-round ratio of the two");
ABSL_FLAG(std::string, device, "cpu", "cpu, or gpu: each worker's replica on /gpu:0");
ABSL_FLAG(bool, prefetch_to_device, true,
          "--device=gpu: batches staged on the GPU by the input pipeline (false: host batches "
          "copied in by each step)");
ABSL_FLAG(bool, profile_ops, false,
          "--device=gpu: print worker 0's per-op GPU time (CUDA events) over the measured steps");
ABSL_FLAG(int, timeout_s, 300, "a run's bound; its processes are killed after it");
// Internal: a worker process.
ABSL_FLAG(int, child_rank, -1, "internal");
ABSL_FLAG(int, child_world, 1, "internal");
ABSL_FLAG(std::string, child_store, "", "internal");

namespace lockstep {
namespace {

using bench::Median;

// The rendezvous of the bench's worker processes: a WorkerServiceClient whose key-value
// calls go to a FileStore in a temporary directory (no coordinator needed).
class FileStoreClient final : public worker::WorkerServiceClient {
 public:
  explicit FileStoreClient(std::string dir) : store_(std::move(dir)) {}
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest&) override {
    return absl::UnimplementedError("bench");
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest&) override {
    return absl::UnimplementedError("bench");
  }
  absl::Status Deregister(const v1::DeregisterRequest&) override {
    return absl::UnimplementedError("bench");
  }
  absl::Status SetKey(const std::string& key, const std::string& value, bool) override {
    return store_.Set(key, value);
  }
  absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) override {
    return store_.Get(key, absl::Now() + timeout);
  }
  absl::Status Barrier(const v1::BarrierRequest&) override {
    return absl::UnimplementedError("bench");
  }
  std::string address() const override { return "file-store"; }

 private:
  collectives::FileStore store_;
};

bool IsTransformer() { return absl::GetFlag(FLAGS_model) == "transformer"; }
bool IsMlp4096() { return absl::GetFlag(FLAGS_model) == "mlp_4096"; }
bool OnGpu() { return absl::GetFlag(FLAGS_device) == "gpu"; }

int GlobalBatch() {
  if (absl::GetFlag(FLAGS_batch) > 0) return absl::GetFlag(FLAGS_batch);
  return IsTransformer() ? 16 : 256;
}

// The Transformer without its token embedding: synthetic features are floats.
bench::TransformerShape TransformerShape() {
  bench::TransformerShape shape;
  shape.vocab = 0;
  return shape;
}

v1::ModelSpec Mlp() {
  v1::ModelSpec m;
  m.add_input_shape(784);
  m.set_seed(1);
  m.set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  m.add_layers()->mutable_dense()->set_units(1024);
  m.add_layers()->mutable_relu();
  m.add_layers()->mutable_dense()->set_units(1024);
  m.add_layers()->mutable_relu();
  m.add_layers()->mutable_dense()->set_units(10);
  return m;
}

// The GPU comparison's model (tools/gpu/torch_train.py trains the same).
v1::ModelSpec Mlp4096() {
  v1::ModelSpec m;
  m.add_input_shape(4096);
  m.set_seed(1);
  m.set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  m.add_layers()->mutable_dense()->set_units(8192);
  m.add_layers()->mutable_relu();
  m.add_layers()->mutable_dense()->set_units(8192);
  m.add_layers()->mutable_relu();
  m.add_layers()->mutable_dense()->set_units(10);
  return m;
}

v1::ModelSpec Model() {
  v1::ModelSpec m = IsTransformer() ? bench::TransformerSpec(TransformerShape())
                                    : (IsMlp4096() ? Mlp4096() : Mlp());
  if (absl::GetFlag(FLAGS_precision) == "bf16_mixed") m.set_precision(v1::Precision::BF16_MIXED);
  return m;
}

const char* ModelName() {
  if (IsTransformer()) return "Transformer 2x(seq 128, width 256, 4 heads, causal)";
  return IsMlp4096() ? "MLP 4096-8192-8192-10" : "MLP 784-1024-1024-10";
}

v1::OptimizerSpec Sgd() {
  v1::OptimizerSpec o;
  o.mutable_sgd();
  o.mutable_learning_rate()->mutable_constant()->set_value(0.01);
  return o;
}

// A worker's failure: on stderr, and as "ERROR <message>" on stdout, which the parent reads
// for worker 0 and repeats as the run's failure.
void ChildError(int rank, const std::string& message) {
  fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
  printf("ERROR rank %d: %s\n", rank, message.c_str());
  fflush(stdout);
}

// One worker process: runs its partition, prints "EPS <examples/s>" (rank 0).
int Child(int rank, int world, const std::string& store_dir) {
  if (absl::GetFlag(FLAGS_pin_workers)) {
    const std::vector<std::vector<int>> cpus = CpusPerWorker(world, 1, AllowedCpus());
    if (!cpus.empty()) {
      if (absl::Status s = SetCpuAffinity(cpus[rank]); !s.ok()) {
        fprintf(stderr, "rank %d: pinning: %s\n", rank, s.ToString().c_str());
        return 1;
      }
    }
  }
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int steps = absl::GetFlag(FLAGS_steps);
  v1::Partition p;
  p.set_job_id("bench");
  v1::JobSpec* spec = p.mutable_spec();
  spec->set_strategy(v1::MULTI_WORKER_MIRRORED);
  *spec->mutable_model() = Model();
  *spec->mutable_optimizer() = Sgd();
  spec->mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec->mutable_data()->mutable_train()->set_synthetic_examples(GlobalBatch());  // one batch
  spec->set_global_batch_size(GlobalBatch());
  spec->set_steps(warmup + steps);
  spec->mutable_summaries()->set_every_steps(warmup + steps);
  spec->mutable_communication()->set_timeout_ms(60000);
  spec->mutable_communication()->set_disable_shm_heap(!absl::GetFlag(FLAGS_shm_heap));
  spec->mutable_communication()->set_bytes_per_pack(absl::GetFlag(FLAGS_bytes_per_pack));
  spec->mutable_communication()->set_compression(absl::GetFlag(FLAGS_compression) == "bf16"
                                                     ? v1::CommunicationSpec::BF16
                                                     : v1::CommunicationSpec::NONE);
  spec->set_seed(5);
  std::vector<std::string> addresses;
  for (int w = 0; w < world; ++w) addresses.push_back(absl::StrCat("127.0.0.1:", 1 + w));
  worker::SetWorkerGroup(addresses, rank, &p);
  p.set_num_replicas_in_sync(world);
  p.set_shard_index(rank);
  p.set_num_shards(world);
  p.set_rendezvous_prefix("bench");
  p.set_secret("bench-secret");
  // Lowered as the coordinator lowers a submitted job: `world` workers, one replica each.
  spec->set_gpus(OnGpu());
  jobspec::ClusterFacts facts;
  facts.workers.assign(world, jobspec::WorkerFacts{1, OnGpu() ? 1 : 0});
  absl::StatusOr<v1::JobPlan> plan = jobspec::LowerJobSpec(*spec, facts);
  if (!plan.ok()) {
    ChildError(rank, plan.status().ToString());
    return 1;
  }
  *p.mutable_plan() = *std::move(plan);

  FileStoreClient client(store_dir);
  absl::Time start, end;
  engine::gpu::OpProfiler* profiler = nullptr;  // --profile_ops: worker 0's GPU
  worker::JobExecutorOptions options;
  options.client = &client;
#ifdef LOCKSTEP_WITH_CUDA
  std::unique_ptr<collectives::nccl::RealNcclApi> nccl;
#endif
  if (OnGpu()) {
#ifdef LOCKSTEP_WITH_CUDA
    absl::StatusOr<std::shared_ptr<distribute::GpuDeviceSet>> gpus = distribute::MakeCudaGpus({0});
    if (!gpus.ok()) {
      ChildError(rank, gpus.status().ToString());
      return 1;
    }
    options.devices.num_gpus = 1;
    options.devices.gpus = *std::move(gpus);
    if (absl::GetFlag(FLAGS_profile_ops) && rank == 0) {
      absl::StatusOr<engine::gpu::OpProfiler*> p = options.devices.gpus->StartProfiling(0);
      if (!p.ok()) {
        ChildError(rank, p.status().ToString());
        return 1;
      }
      profiler = *p;
    }
    absl::StatusOr<std::unique_ptr<collectives::nccl::RealNcclApi>> loaded =
        collectives::nccl::RealNcclApi::Load();
    if (!loaded.ok()) {
      ChildError(rank, loaded.status().ToString());
      return 1;
    }
    nccl = *std::move(loaded);
    options.nccl.api = nccl.get();
#else
    fprintf(stderr, "--device=gpu needs a --config=cuda build\n");
    return 2;
#endif
  }
  options.transport = absl::GetFlag(FLAGS_transport) == "tcp" ? collectives::TransportKind::kTcp
                                                              : collectives::TransportKind::kShm;
  options.overlap_all_reduce = absl::GetFlag(FLAGS_overlap);
  options.prefetch_to_device = absl::GetFlag(FLAGS_prefetch_to_device);
  distribute::StepTimes measured;  // the measured steps' phases, summed
  absl::Status profile_status;
  options.on_step = [&](int64_t step, const distribute::TrainStepResult& result) {
    if (step == warmup && profiler != nullptr) profile_status.Update(profiler->Reset());
    if (step == warmup) start = absl::Now();
    if (step > warmup) measured += result.times;
    if (step == warmup + steps) end = absl::Now();
  };
  auto executor = worker::JobExecutor::Create(p, options);
  if (!executor.ok()) {
    ChildError(rank, executor.status().ToString());
    return 1;
  }
  v1::JobReport report = (*executor)->Run();
  if (report.phase() != v1::JobReport::DONE) {
    ChildError(rank, report.error());
    return 1;
  }
  if (profiler != nullptr) {
    absl::StatusOr<engine::gpu::OpProfiler::Profile> profile = profiler->Finish();
    profile_status.Update(profile.status());
    if (!profile_status.ok()) {
      ChildError(rank, absl::StrCat("--profile_ops: ", profile_status.ToString()));
      return 1;
    }
    // Prefixed lines: the parent prints them as they are.
    for (absl::string_view line :
         absl::StrSplit(engine::gpu::OpProfiler::Table(*profile), '\n', absl::SkipEmpty())) {
      printf("PROFILE %.*s\n", static_cast<int>(line.size()), line.data());
    }
  }
  if (rank == 0) {
    printf("EPS %.3f\n", steps * GlobalBatch() / absl::ToDoubleSeconds(end - start));
    auto ms = [&](absl::Duration d) { return absl::ToDoubleMilliseconds(d) / steps; };
    printf("PHASES %.4f %.4f %.4f %.4f %.4f %.4f\n", ms(measured.total), ms(measured.compute),
           ms(measured.allreduce_wait), ms(measured.apply), ms(end - start),
           ms(measured.input_wait));
    if (options.devices.gpus != nullptr) {
      const engine::gpu::GpuDevice* gpu = options.devices.gpus->Find(0);
      printf("PEAK %llu\n",
             static_cast<unsigned long long>(gpu->context->allocator_stats().peak_bytes_in_use));
    }
  }
  return 0;
}

// The largest peak of device memory worker 0 reported (--device=gpu), in bytes.
unsigned long long g_peak_device_bytes = 0;

// How a run's workers are set up (--shm_heap, --pin_workers, --compression).
struct Variant {
  bool shm_heap = true;
  bool pin = false;
  bool bf16 = false;
};

// Worker 0's milliseconds per measured step: the whole step, compute, all-reduce wait, apply
// (distribute::StepTimes), the period between steps (the step and the time outside it), and
// the input wait before the step (part of the time outside it).
using Phases = std::array<double, 6>;

// The worker processes of every run, killed at exit if any still runs. Made first thing in
// Main(), before any thread starts: ChildProcesses blocks SIGCHLD, and threads started later
// inherit that.
ChildProcesses& WorkerProcesses() {
  static ChildProcesses workers;
  return workers;
}

// This binary's path: a worker is this binary run with --child_rank.
std::string SelfPath() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "/proc/self/exe" : self.string();
}

// One run with `world` worker processes; worker 0's examples/s, or -1 on failure. Worker 0's
// step phases go to *phases when it is not null.
double RunOnce(int world, int run, Variant variant, Phases* phases = nullptr) {
  char tmpl[] = "/tmp/lockstep-train-throughput-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return -1;
  const std::string dir = tmpl;
  const std::string out = dir + "/worker0.out";  // worker 0's figures
  ChildProcesses& workers = WorkerProcesses();
  absl::Status done = absl::OkStatus();
  for (int r = 0; r < world && done.ok(); ++r) {
    const std::string args[] = {
        "--child_rank=" + std::to_string(r),
        "--child_world=" + std::to_string(world),
        "--child_store=" + dir,
        "--warmup=" + std::to_string(absl::GetFlag(FLAGS_warmup)),
        "--steps=" + std::to_string(absl::GetFlag(FLAGS_steps)),
        "--batch=" + std::to_string(GlobalBatch()),
        "--model=" + absl::GetFlag(FLAGS_model),
        "--transport=" + absl::GetFlag(FLAGS_transport),
        absl::StrCat("--overlap=", absl::GetFlag(FLAGS_overlap)),
        absl::StrCat("--bytes_per_pack=", absl::GetFlag(FLAGS_bytes_per_pack)),
        absl::StrCat("--shm_heap=", variant.shm_heap),
        absl::StrCat("--pin_workers=", variant.pin),
        absl::StrCat("--compression=", variant.bf16 ? "bf16" : "none"),
        "--device=" + absl::GetFlag(FLAGS_device),
        absl::StrCat("--prefetch_to_device=", absl::GetFlag(FLAGS_prefetch_to_device)),
        "--precision=" + absl::GetFlag(FLAGS_precision),
        absl::StrCat("--profile_ops=", absl::GetFlag(FLAGS_profile_ops))};
    std::vector<std::string> argv = {SelfPath()};
    argv.insert(argv.end(), std::begin(args), std::end(args));
    done = workers.Exec(absl::StrCat("worker ", r), argv, r == 0 ? out : "").status();
  }
  if (done.ok()) {
    done = workers.WaitAll(absl::Seconds(absl::GetFlag(FLAGS_timeout_s)));
  } else {
    workers.KillAll();
  }
  const bool ok = done.ok();
  std::string text;
  {
    std::ifstream f(out);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  double eps = -1;
  const size_t at = text.find("EPS ");
  if (!ok || at == std::string::npos ||
      !absl::SimpleAtod(text.substr(at + 4, text.find('\n', at) - at - 4), &eps)) {
    const size_t error = text.find("ERROR ");
    // On stdout too, after the header: the run's last line says why (tools/gpu_check.sh):
    // worker 0's error, or else which worker failed or that the run passed --timeout_s.
    printf("run %d with %d worker(s) failed%s%s\n", run, world,
           error == std::string::npos && ok ? "" : ": ",
           error == std::string::npos
               ? std::string(done.message()).c_str()
               : text.substr(error + 6, text.find('\n', error) - error - 6).c_str());
    fflush(stdout);
    return -1;
  }
  // --profile_ops: worker 0's per-op table, as it printed it.
  bool profiled = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "PROFILE ")) continue;
    if (!profiled) {
      printf("per-op GPU time of worker 0, run %d with %d worker(s) (ms per measured step):\n", run,
             world);
      profiled = true;
    }
    printf("%.*s\n", static_cast<int>(line.size()), line.data());
  }
  if (const size_t p = text.find("PEAK "); p != std::string::npos) {
    unsigned long long peak = 0;
    if (sscanf(text.c_str() + p, "PEAK %llu", &peak) == 1) {
      g_peak_device_bytes = std::max(g_peak_device_bytes, peak);
    }
  }
  if (phases != nullptr) {
    const size_t p = text.find("PHASES ");
    if (p == std::string::npos ||
        sscanf(text.c_str() + p, "PHASES %lf %lf %lf %lf %lf %lf", &(*phases)[0], &(*phases)[1],
               &(*phases)[2], &(*phases)[3], &(*phases)[4], &(*phases)[5]) != 6) {
      fprintf(stderr, "run %d with %d worker(s): worker 0 printed no step phases\n", run, world);
      return -1;
    }
  }
  return eps;
}

// Median seconds of a bare engine step (forward, backward, SGD) at the same size.
double BareEngineStep() {
  auto graph = engine::BuildModel(Model());
  auto vars = engine::VariableSet::Initialize(*graph);
  auto executor = engine::Executor::Create(&*graph);
  auto optimizer = engine::Optimizer::Create(Sgd(), graph->Variables());
  if (!graph.ok() || !vars.ok() || !executor.ok() || !optimizer.ok()) return -1;
  const int batch = GlobalBatch();
  std::vector<int64_t> dims = {batch};
  const v1::ModelSpec model = Model();
  for (int64_t d : model.input_shape()) dims.push_back(d);
  engine::Tensor x = engine::Tensor::Zeros(DType::kF32, engine::Shape(dims));
  std::vector<int64_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % 10;
  engine::Tensor y = engine::Tensor::FromVector<int64_t>(labels, engine::Shape{batch});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = (i % 97) / 97.0f;
  std::vector<engine::Tensor> grads;
  std::vector<double> times;
  for (int s = 0; s < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_steps); ++s) {
    const absl::Time t0 = absl::Now();
    engine::StepOptions so;
    so.step = s;
    if (!(*executor)
             ->ComputeGradients(vars->tensors(), {{"features", x}, {"labels", y}}, so, &grads)
             .ok() ||
        !(*optimizer)->Apply(grads, &vars->tensors()).ok()) {
      return -1;
    }
    if (s >= absl::GetFlag(FLAGS_warmup)) times.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
  }
  return Median(times);
}

int Main() {
  WorkerProcesses();
  std::vector<int> counts;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(w, &n) && n > 0) counts.push_back(n);
  }
  if (absl::GetFlag(FLAGS_device) != "cpu" && absl::GetFlag(FLAGS_device) != "gpu") {
    fprintf(stderr, "--device: cpu or gpu, not %s\n", absl::GetFlag(FLAGS_device).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_warmup) < 1 || absl::GetFlag(FLAGS_steps) < 1) {
    // The clock starts when the last warmup step ends (the job reports steps as they end).
    fprintf(stderr, "--warmup and --steps must be >= 1, got --warmup=%d --steps=%d\n",
            absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_steps));
    return 2;
  }
  if (absl::GetFlag(FLAGS_profile_ops) && !OnGpu()) {
    fprintf(stderr, "--profile_ops times GPU streams: it needs --device=gpu\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_compression) != "none" && absl::GetFlag(FLAGS_compression) != "bf16") {
    fprintf(stderr, "--compression: none or bf16, not %s\n",
            absl::GetFlag(FLAGS_compression).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_precision) != "f32" && absl::GetFlag(FLAGS_precision) != "bf16_mixed") {
    fprintf(stderr, "--precision: f32 or bf16_mixed, not %s\n",
            absl::GetFlag(FLAGS_precision).c_str());
    return 2;
  }
  const Variant variant{absl::GetFlag(FLAGS_shm_heap), absl::GetFlag(FLAGS_pin_workers),
                        absl::GetFlag(FLAGS_compression) == "bf16"};
  printf(
      "train_throughput: %s, global batch %d, %s, SGD, synthetic data,\n"
      "one compute thread per worker process%s, %s transport%s, gradients compressed: %s; %d "
      "measured steps after %d, median of %d runs\n",
      ModelName(), GlobalBatch(), absl::GetFlag(FLAGS_precision).c_str(),
      variant.pin ? " (each on a CPU of its own)" : "", absl::GetFlag(FLAGS_transport).c_str(),
      absl::GetFlag(FLAGS_transport) == "shm" && variant.shm_heap
          ? " (gradients in its zero-copy heap)"
          : "",
      variant.bf16 ? "bf16" : "none", absl::GetFlag(FLAGS_steps), absl::GetFlag(FLAGS_warmup),
      absl::GetFlag(FLAGS_runs));
  // Rounds interleave the worker counts (1, 2, 1, 2, ...) and the bare engine step, so that
  // a slow spell of this shared machine hits every figure alike; each round's ratios are
  // printed besides the ratios of the medians.
  std::map<int, std::vector<double>> eps;
  std::map<int, std::vector<Phases>> phases;  // worker 0's, per run of the set variant
  // --compare_shm_heap and --compare_pinning: the other setting's runs, by name.
  std::vector<std::pair<std::string, Variant>> others;
  if (absl::GetFlag(FLAGS_compare_shm_heap)) {
    others.push_back({variant.shm_heap ? "without the shm heap" : "with the shm heap",
                      Variant{!variant.shm_heap, variant.pin, variant.bf16}});
  }
  if (absl::GetFlag(FLAGS_compare_pinning)) {
    others.push_back({variant.pin ? "unpinned" : "pinned",
                      Variant{variant.shm_heap, !variant.pin, variant.bf16}});
  }
  if (absl::GetFlag(FLAGS_compare_compression)) {
    others.push_back({variant.bf16 ? "uncompressed" : "bf16-compressed",
                      Variant{variant.shm_heap, variant.pin, !variant.bf16}});
  }
  std::vector<std::map<int, std::vector<double>>> eps_other(others.size());
  std::vector<std::map<int, std::vector<Phases>>> phases_other(others.size());
  std::vector<double> bare;
  // The bare engine step is the CPU's: not a comparison for GPU replicas.
  const bool has_one = std::find(counts.begin(), counts.end(), 1) != counts.end() && !OnGpu();
  // The host moves this VM's vCPUs between placements that differ 2-8x in how fast the two
  // CPUs share data (bench/core_latency.h); each round's probe is printed with its ratios.
  std::vector<double> probe_ns;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    absl::StatusOr<bench::CoreLatency> probe = bench::MeasureCoreLatency();
    probe_ns.push_back(probe.ok() ? probe->round_trip_ns : -1);
    for (int world : counts) {
      // The compared settings run before the set one in odd rounds: the second run of a pair
      // measured faster often enough to fake a 5 % gain (see the revert of SetComputeIdle).
      auto run_others = [&]() -> bool {
        for (size_t o = 0; o < others.size() && world > 1; ++o) {
          Phases ph;
          const double f = RunOnce(world, run, others[o].second, &ph);
          if (f < 0) return false;
          eps_other[o][world].push_back(f);
          phases_other[o][world].push_back(ph);
        }
        return true;
      };
      if (run % 2 == 1 && !run_others()) return 1;
      Phases ph;
      const double e = RunOnce(world, run, variant, &ph);
      if (e < 0) return 1;
      eps[world].push_back(e);
      phases[world].push_back(ph);
      if (run % 2 == 0 && !run_others()) return 1;
    }
    if (has_one) bare.push_back(BareEngineStep());
  }
  for (size_t o = 0; o < others.size(); ++o) {
    for (const auto& [world, other] : eps_other[o]) {
      std::string rounds;
      for (size_t r = 0; r < other.size(); ++r) {
        absl::StrAppend(&rounds, r ? ", " : "", absl::StrFormat("%.3f", eps[world][r] / other[r]));
      }
      printf("%d worker(s) %s: %10.1f examples/s median; as set / %s per round: %s\n", world,
             others[o].first.c_str(), Median(other), others[o].first.c_str(), rounds.c_str());
    }
  }
  for (int world : counts) {
    std::string all;
    for (double e : eps[world]) absl::StrAppend(&all, all.empty() ? "" : ", ", absl::SixDigits(e));
    printf("%d worker(s): %10.1f examples/s median (runs: %s)\n", world, Median(eps[world]),
           all.c_str());
  }
  // Medians of each phase over the runs (so they need not add up exactly).
  auto median_phases = [](const std::vector<Phases>& runs) {
    Phases m;
    for (size_t k = 0; k < m.size(); ++k) {
      std::vector<double> v;
      for (const Phases& p : runs) v.push_back(p[k]);
      m[k] = Median(v);
    }
    return m;
  };
  auto print_phases = [&](int world, const std::string& what, const std::vector<Phases>& runs) {
    const Phases m = median_phases(runs);
    printf(
        "%d worker(s)%s, worker 0's step: %.2f ms = compute %.2f + all-reduce wait %.2f + apply "
        "%.2f + other %.2f; period %.2f ms: %.2f ms per step outside the step (input wait "
        "%.2f) (medians)\n",
        world, what.c_str(), m[0], m[1], m[2], m[3], m[0] - m[1] - m[2] - m[3], m[4], m[4] - m[0],
        m[5]);
  };
  for (int world : counts) print_phases(world, "", phases[world]);
  if (OnGpu()) {
    for (int world : counts) {
      const Phases m = median_phases(phases[world]);
      printf(
          "gpu: %d worker(s) %.1f examples/s (median), step %.2f ms, outside it %.2f ms per "
          "step (input wait %.2f), peak device bytes %llu (%.1f MiB)\n",
          world, Median(eps[world]), m[0], m[4] - m[0], m[5], g_peak_device_bytes,
          g_peak_device_bytes / 1048576.0);
    }
  }
  for (size_t o = 0; o < others.size(); ++o) {
    for (const auto& [world, runs] : phases_other[o]) {
      print_phases(world, " " + others[o].first, runs);
    }
  }
  if (!has_one) return 0;
  const double one = Median(eps[1]);
  for (int world : counts) {
    if (world == 1) continue;
    std::string rounds;
    for (size_t r = 0; r < eps[world].size(); ++r) {
      absl::StrAppend(&rounds, r ? ", " : "", absl::StrFormat("%.2f", eps[world][r] / eps[1][r]));
      if (probe_ns[r] > 0) absl::StrAppendFormat(&rounds, " (%.0f ns)", probe_ns[r]);
    }
    printf(
        "scaling %d workers / 1: %.2fx (goal >= 1.6x for 2; per round, with its core-to-core "
        "round trip: %s)\n",
        world, Median(eps[world]) / one, rounds.c_str());
  }
  const double job_step = GlobalBatch() / one;
  const double bare_step = Median(bare);
  printf("1-worker job step %.2f ms vs bare engine step %.2f ms: %.3fx (goal <= 1.1x)\n",
         job_step * 1e3, bare_step * 1e3, job_step / bare_step);
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_child_rank) >= 0) {
    return lockstep::Child(absl::GetFlag(FLAGS_child_rank), absl::GetFlag(FLAGS_child_world),
                           absl::GetFlag(FLAGS_child_store));
  }
  return lockstep::Main();
}
