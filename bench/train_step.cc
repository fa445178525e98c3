// bench/train_step: one training step (forward, backward, SGD update) of an MLP
// 784-1024-1024-10 at batch 256, one thread, f32. Prints the median step time over
// --steps steps after --warmup, the FLOP bound (the step's GEMM FLOPs divided by the
// single-thread sgemm rate of a 1024^3 product measured in this run, interleaved with the
// steps; the ratio is the median over steps of each step against the sgemm timed right after
// it, so that a slow spell of this shared machine weighs on both sides alike), the time of the
// step's GEMMs alone (the same calls on scratch operands: how close the GEMMs themselves come to
// the bound), and the peak resident memory.
//   bazel run //bench:train_step
//   bazel run //bench:train_step -- --steps=50 --batch=256 --blas_threads=1
// --model=transformer times instead a causal Transformer classifier (token embedding, two
// blocks of layer_norm, 4-head self_attention, residual add, layer_norm, dense 4d, gelu,
// dense d, residual add; pooling, dense) at sequence 128, width 256, vocabulary 1000, batch
// --batch (default 8 for it), against the FLOP bound of its GEMMs (attention products counted
// in full: the causal mask does not skip them); goal <= 1.3.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/transformer_spec.h"
#include "collectives/bench/peer_measurement.h"
#include "common/process.h"
#include "engine/executor.h"
#include "engine/kernels/cpu/blas.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"
#include "engine/philox.h"
#include "engine/variable_set.h"

ABSL_FLAG(int, batch, 0, "examples per step (0: 256 for mlp, 8 for transformer)");
ABSL_FLAG(std::string, model, "mlp", "mlp or transformer");
ABSL_FLAG(int, steps, 50, "measured steps");
ABSL_FLAG(int, warmup, 5, "steps before measuring");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads");

namespace {

using lockstep::DType;
using lockstep::bench::Median;
using lockstep::engine::Shape;
using lockstep::engine::Tensor;

Tensor RandomTensor(Shape shape, uint64_t stream) {
  Tensor t(DType::kF32, shape);
  lockstep::engine::Philox rng(stream);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = float(rng.Uniform(i));
  return t;
}

// Scratch operands for the reference GEMMs (1024^2 floats each, enough for every shape).
struct Scratch {
  Tensor a = RandomTensor(Shape{1024 * 1024}, 4);
  Tensor b = RandomTensor(Shape{1024 * 1024}, 5);
  Tensor c = Tensor(DType::kF32, Shape{1024 * 1024});
};

// Seconds for one 1024^3 sgemm.
double SgemmSeconds(Scratch& s) {
  absl::Time start = absl::Now();
  lockstep::engine::cpu::Gemm<float>(false, false, 1024, 1024, 1024, 1.0f, s.a.data<float>(),
                                     s.b.data<float>(), 0.0f, s.c.data<float>());
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Seconds for the step's own GEMMs alone (same shapes and transposes): what the step
// would take if everything else were free.
double StepGemmSeconds(Scratch& s, const std::vector<lockstep::bench::GemmCall>& calls) {
  absl::Time start = absl::Now();
  for (const lockstep::bench::GemmCall& k : calls) {
    for (int64_t i = 0; i < k.times; ++i) {
      lockstep::engine::cpu::Gemm<float>(k.trans_a, k.trans_b, k.m, k.n, k.k, 1.0f,
                                         s.a.data<float>(), s.b.data<float>(), 0.0f,
                                         s.c.data<float>());
    }
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The MLP step's GEMMs: forward and weight gradient for every layer, input gradient for
// every layer but the first (the features need none).
std::vector<lockstep::bench::GemmCall> MlpStepGemms(int batch, const std::vector<int64_t>& widths) {
  std::vector<lockstep::bench::GemmCall> calls;
  for (size_t l = 1; l < widths.size(); ++l) {
    const int64_t in = widths[l - 1], out = widths[l];
    calls.push_back({false, false, batch, out, in});            // forward
    calls.push_back({true, false, in, out, batch});             // weight gradient
    if (l > 1) calls.push_back({false, true, batch, in, out});  // input gradient
  }
  return calls;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  namespace engine = lockstep::engine;
  const bool transformer = absl::GetFlag(FLAGS_model) == "transformer";
  if (!transformer && absl::GetFlag(FLAGS_model) != "mlp") {
    return std::fprintf(stderr, "--model: mlp or transformer\n"), 1;
  }
  const int batch =
      absl::GetFlag(FLAGS_batch) > 0 ? absl::GetFlag(FLAGS_batch) : (transformer ? 8 : 256);
  const std::vector<int64_t> widths = {784, 1024, 1024, 10};

  lockstep::v1::ModelSpec spec;
  spec.add_input_shape(widths[0]);
  spec.set_seed(1);
  spec.set_loss(lockstep::v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  for (size_t l = 1; l < widths.size(); ++l) {
    spec.add_layers()->mutable_dense()->set_units(widths[l]);
    if (l + 1 < widths.size()) spec.add_layers()->mutable_relu();
  }
  lockstep::v1::OptimizerSpec opt_spec;
  opt_spec.mutable_sgd();
  opt_spec.mutable_learning_rate()->mutable_constant()->set_value(0.01);

  if (transformer) spec = lockstep::bench::TransformerSpec({});
  auto graph = engine::BuildModel(spec);
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;
  auto vars = *engine::VariableSet::Initialize(*graph);
  engine::ExecutorOptions options;
  options.blas_threads = absl::GetFlag(FLAGS_blas_threads);
  auto exec = *engine::Executor::Create(&*graph, options);
  auto opt = *engine::Optimizer::Create(opt_spec, graph->Variables());

  Tensor features = RandomTensor(Shape{batch, widths[0]}, 3);
  if (transformer) {  // token ids
    const lockstep::bench::TransformerShape shape;
    features = RandomTensor(Shape{batch, shape.seq}, 3);
    for (int64_t i = 0; i < features.num_elements(); ++i) {
      features.data<float>()[i] =
          float(int64_t(features.data<float>()[i] * shape.vocab) % shape.vocab);
    }
  }
  std::vector<int64_t> label_values(batch);
  for (int i = 0; i < batch; ++i) label_values[i] = i % 10;
  engine::Feeds feeds = {{"features", features},
                         {"labels", Tensor::FromVector(label_values, Shape{batch})}};

  std::vector<Tensor> grads;
  // The reference GEMMs run interleaved with the steps, so that all three medians see the
  // same machine load (these machines are shared).
  Scratch scratch;
  std::vector<double> times, sgemm_times, gemm_only_times;
  const std::vector<lockstep::bench::GemmCall> gemm_calls =
      transformer ? lockstep::bench::TransformerStepGemms({}, batch) : MlpStepGemms(batch, widths);
  const int warmup = absl::GetFlag(FLAGS_warmup), steps = absl::GetFlag(FLAGS_steps);
  double loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    engine::StepOptions step;
    step.step = s;
    absl::Time start = absl::Now();
    auto r = exec->ComputeGradients(vars.tensors(), feeds, step, &grads);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    if (absl::Status st = opt->Apply(grads, &vars.tensors()); !st.ok()) {
      return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
    }
    const double step_s = absl::ToDoubleSeconds(absl::Now() - start);
    loss = r->loss;
    if (s < warmup) continue;
    times.push_back(step_s);
    sgemm_times.push_back(SgemmSeconds(scratch));
    gemm_only_times.push_back(StepGemmSeconds(scratch, gemm_calls));
  }

  const double flops = lockstep::bench::GemmFlops(gemm_calls);  // the step's GEMM FLOPs
  const double sgemm_flops = 2.0 * 1024 * 1024 * 1024;
  std::vector<double> step_ratios, gemm_only_ratios;
  for (size_t i = 0; i < times.size(); ++i) {
    const double bound_i = flops / sgemm_flops * sgemm_times[i];
    step_ratios.push_back(times[i] / bound_i);
    gemm_only_ratios.push_back(gemm_only_times[i] / bound_i);
  }
  const double sgemm_s = Median(sgemm_times);
  const double gflops = sgemm_flops / sgemm_s / 1e9;
  const double bound_s = flops / (gflops * 1e9);
  const double step_s = Median(times);
  const double gemm_only_s = Median(gemm_only_times);
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);

  std::printf(
      "train_step: %s, batch %d, f32, %d BLAS thread(s) (OpenBLAS %s "
      "kernels), %d steps after %d warm-up\n",
      transformer ? "Transformer 2x(seq 128, width 256, 4 heads, causal)" : "MLP 784-1024-1024-10",
      batch, absl::GetFlag(FLAGS_blas_threads), lockstep::engine::cpu::BlasCoreName().c_str(),
      steps, warmup);
  std::printf("  median step        %8.2f ms   (min %.2f, max %.2f; last loss %.4f)\n",
              step_s * 1e3, *std::min_element(times.begin(), times.end()) * 1e3,
              *std::max_element(times.begin(), times.end()) * 1e3, loss);
  std::printf("  sgemm 1024^3       %8.2f GFLOP/s\n", gflops);
  std::printf("  step GEMM FLOPs    %8.3f GFLOP\n", flops / 1e9);
  std::printf("  FLOP bound         %8.2f ms\n", bound_s * 1e3);
  std::printf("  ratio to bound     %8.3f x   (goal <= %s; median of the per-step ratios)\n",
              Median(step_ratios), transformer ? "1.3" : "1.15");
  std::printf("  step's GEMMs alone %8.2f ms   (%.3f x the bound; the rest of the step: %.2f ms)\n",
              gemm_only_s * 1e3, Median(gemm_only_ratios), (step_s - gemm_only_s) * 1e3);
  std::printf("  peak memory (RSS)  %8.1f MiB\n", usage.ru_maxrss / 1024.0);
  return 0;
}
