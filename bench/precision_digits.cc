// bench/precision_digits: the digits MLP (examples/digits_mlp.json's model, 64-128-10, with
// examples/digits_optimizer.json's Adam and warmup-cosine schedule) trained on the bundled digits
// in f32 and in BF16_MIXED (graph.proto's Precision) on this CPU, one thread, --steps steps at
// batch --batch over the training set in order. Prints, per precision, the mean training loss
// of the last 50 steps, the test set's loss and accuracy after training (the same every run:
// training is deterministic) and the median over --runs runs of the time per step; runs
// alternate the two precisions so that a slow spell of this shared machine hits both alike.
//   bazel run //bench:precision_digits
//   bazel run //bench:precision_digits -- --steps=600 --runs=3 --batch=48
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "common/status.h"
#include "engine/executor.h"
#include "engine/kernels/cpu/blas.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "examples/digits_data.h"

ABSL_FLAG(int, steps, 600, "training steps per run");
ABSL_FLAG(int, batch, 48, "examples per step (digits_mlp.json's global batch)");
ABSL_FLAG(int, runs, 3, "runs per precision (the median step time is reported)");

namespace lockstep {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read " + path + " (run through bazel run)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rows [begin, begin + n) of an [N, ...] tensor, wrapping around at N.
engine::Tensor Rows(const engine::Tensor& t, int64_t begin, int64_t n) {
  const int64_t total = t.shape().dim(0);
  const size_t row = t.num_bytes() / total;
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = n;
  engine::Tensor out(t.dtype(), engine::Shape(dims));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row,
                static_cast<const char*>(t.raw_data()) + ((begin + i) % total) * row, row);
  }
  return out;
}

struct Result {
  double last_loss = 0;  // mean of the last 50 steps' training loss
  double test_loss = 0, test_accuracy = 0;
  double step_ms = 0;
};

absl::StatusOr<Result> Train(const v1::ModelSpec& model, const v1::OptimizerSpec& optimizer,
                             const data::Element& train, const data::Element& test) {
  LS_ASSIGN_OR_RETURN(engine::Graph graph, engine::BuildModel(model));
  LS_ASSIGN_OR_RETURN(engine::VariableSet vars, engine::VariableSet::Initialize(graph));
  LS_ASSIGN_OR_RETURN(auto exec, engine::Executor::Create(&graph));
  LS_ASSIGN_OR_RETURN(auto opt, engine::Optimizer::Create(optimizer, graph.Variables()));
  const int steps = absl::GetFlag(FLAGS_steps), batch = absl::GetFlag(FLAGS_batch);
  std::vector<engine::Tensor> grads;
  Result r;
  double tail = 0;
  int tail_steps = 0;
  const absl::Time start = absl::Now();
  for (int step = 0; step < steps; ++step) {
    const int64_t begin = int64_t{step} * batch;
    engine::StepOptions options;
    options.step = step;
    LS_ASSIGN_OR_RETURN(engine::StepResult s,
                        exec->ComputeGradients(vars.tensors(),
                                               {{"features", Rows(train.features, begin, batch)},
                                                {"labels", Rows(train.labels, begin, batch)}},
                                               options, &grads));
    LS_RETURN_IF_ERROR(opt->Apply(grads, &vars.tensors()));
    if (step >= steps - 50) tail += s.loss, ++tail_steps;
  }
  r.step_ms = absl::ToDoubleMilliseconds(absl::Now() - start) / steps;
  r.last_loss = tail / std::max(tail_steps, 1);
  engine::Tensor logits;
  LS_ASSIGN_OR_RETURN(
      engine::StepResult e,
      exec->Evaluate(vars.tensors(), {{"features", test.features}, {"labels", test.labels}},
                     &logits));
  r.test_loss = e.loss;
  r.test_accuracy = e.accuracy;
  return r;
}

int Main() {
  engine::cpu::SetBlasThreads(1);
  absl::StatusOr<std::string> model_json = ReadText("examples/digits_mlp.json");
  absl::StatusOr<std::string> opt_json = ReadText("examples/digits_optimizer.json");
  if (!model_json.ok() || !opt_json.ok()) {
    fprintf(stderr, "precision_digits: %s\n",
            (model_json.ok() ? opt_json.status() : model_json.status()).ToString().c_str());
    return 1;
  }
  absl::StatusOr<v1::ModelSpec> model = engine::ParseModelSpecJson(*model_json);
  absl::StatusOr<v1::OptimizerSpec> optimizer = engine::ParseOptimizerSpecJson(*opt_json);
  auto digits = examples::LoadDigits();
  if (!model.ok() || !optimizer.ok() || !digits.ok()) {
    fprintf(stderr, "precision_digits: %s %s %s\n", model.status().ToString().c_str(),
            optimizer.status().ToString().c_str(), digits.status().ToString().c_str());
    return 1;
  }
  const v1::Precision::Mode modes[] = {v1::Precision::F32, v1::Precision::BF16_MIXED};
  std::vector<Result> results[2];
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    for (int k = 0; k < 2; ++k) {
      const int m = (run % 2 == 0) ? k : 1 - k;  // alternate which goes first
      model->set_precision(modes[m]);
      absl::StatusOr<Result> r = Train(*model, *optimizer, digits->first, digits->second);
      if (!r.ok()) {
        fprintf(stderr, "precision_digits: %s\n", r.status().ToString().c_str());
        return 1;
      }
      results[m].push_back(*r);
    }
  }
  printf(
      "digits MLP 64-128-10, Adam (warmup-cosine), batch %d, %d steps, one thread (%s), "
      "median of %d runs\n",
      absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_steps), engine::cpu::BlasCoreName().c_str(),
      absl::GetFlag(FLAGS_runs));
  printf("%-11s %12s %10s %14s %12s\n", "precision", "train loss", "test loss", "test accuracy",
         "ms / step");
  double ms[2];
  for (int m = 0; m < 2; ++m) {
    std::vector<double> t;
    for (const Result& r : results[m]) t.push_back(r.step_ms);
    std::sort(t.begin(), t.end());
    ms[m] = t[t.size() / 2];
    const Result& r = results[m].front();
    printf("%-11s %12.5f %10.5f %14.4f %12.3f\n", v1::Precision::Mode_Name(modes[m]).c_str(),
           r.last_loss, r.test_loss, r.test_accuracy, ms[m]);
  }
  printf("BF16_MIXED / F32 step time: %.2fx\n", ms[1] / ms[0]);
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  return lockstep::Main();
}
