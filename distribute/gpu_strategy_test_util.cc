#include "distribute/gpu_strategy_test_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "engine/model_builder.h"

namespace lockstep::distribute {

using engine::Shape;
using engine::Tensor;

engine::Graph DigitsGraph() {
  absl::StatusOr<v1::ModelSpec> spec = engine::ParseModelSpecJson(R"({
    "inputShape": [64], "seed": 11, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
    "labelSmoothing": 0.1,
    "layers": [
      {"name": "hidden", "dense": {"units": 32}},
      {"relu": {}},
      {"name": "logits", "dense": {"units": 10}}
    ]})");
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<engine::Graph> graph = engine::BuildModel(*spec);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

TrainerOptions DigitsTrainerOptions(double learning_rate, bool momentum) {
  TrainerOptions o;
  if (momentum) {
    o.optimizer.mutable_momentum()->set_momentum(0.9);
  } else {
    o.optimizer.mutable_sgd();
  }
  o.optimizer.mutable_learning_rate()->mutable_constant()->set_value(learning_rate);
  o.global_batch_size = kDigitsGlobalBatch;
  return o;
}

std::vector<Tensor> DigitsBatch(int64_t batch, int64_t step) {
  std::mt19937_64 rng(1000 + step);
  std::uniform_int_distribution<int> pixel(0, 16);
  std::vector<float> x(batch * 64);
  std::vector<int64_t> y(batch);
  for (int64_t b = 0; b < batch; ++b) {
    int best = 0;
    float best_sum = -1;
    for (int c = 0; c < 10; ++c) {
      float s = 0;
      for (int p = 0; p < 6; ++p) {
        const float v = pixel(rng) / 16.f;
        x[b * 64 + c * 6 + p] = v;
        s += v;
      }
      if (s > best_sum) best_sum = s, best = c;
    }
    for (int p = 60; p < 64; ++p) x[b * 64 + p] = pixel(rng) / 16.f;
    y[b] = best;
  }
  return {Tensor::FromVector(x, Shape{batch, 64}), Tensor::FromVector(y, Shape{batch})};
}

absl::Status TrainSteps(Strategy& strategy, Trainer& trainer, int first, int n,
                        std::vector<double>* losses, int64_t global_batch) {
  const int replicas = strategy.num_local_replicas();
  const std::vector<engine::Device>& devices = strategy.extended().worker_devices();
  const int k = trainer.accumulation_steps();
  for (int step = first; step < first + n; ++step) {
    std::vector<std::vector<DistributedValues>> micro(k);
    for (int m = 0; m < k; ++m) {
      const std::vector<Tensor> batch = DigitsBatch(global_batch, int64_t{step} * k + m);
      const int64_t per = global_batch / replicas;
      for (const Tensor& t : batch) {
        std::vector<Tensor> parts;
        for (int r = 0; r < replicas; ++r) {
          LS_ASSIGN_OR_RETURN(Tensor part, SliceAxis0(t, r * per, (r + 1) * per));
          parts.push_back(HostCopy(part, devices[r]));
        }
        micro[m].push_back(DistributedValues::PerReplica(std::move(parts)));
      }
    }
    absl::StatusOr<TrainStepResult> result = trainer.Step(absl::MakeConstSpan(micro));
    if (!result.ok()) return Annotate(result.status(), absl::StrCat("step ", step));
    if (losses != nullptr) losses->push_back(result->loss);
  }
  return absl::OkStatus();
}

TrainedRun TrainDigits(Strategy& strategy, int steps, double learning_rate, int64_t global_batch,
                       int accumulation_steps, bool momentum) {
  TrainedRun run;
  engine::Graph graph = DigitsGraph();
  TrainerOptions options = DigitsTrainerOptions(learning_rate, momentum);
  options.global_batch_size = global_batch;
  options.optimizer.set_gradient_accumulation_steps(accumulation_steps);
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(&strategy, &graph, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  absl::Status s = TrainSteps(strategy, **trainer, 0, steps, &run.losses, global_batch);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return {};
  absl::StatusOr<std::vector<Tensor>> weights = (*trainer)->HostVariables();
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (weights.ok()) run.weights = *std::move(weights);
  return run;
}

absl::StatusOr<v1::Checkpoint> MakeCheckpoint(const Trainer& trainer) {
  v1::Checkpoint c;
  c.set_global_step(trainer.steps());
  LS_ASSIGN_OR_RETURN(std::vector<Tensor> values, trainer.HostVariables());
  for (size_t i = 0; i < values.size(); ++i) {
    *c.add_variables() = values[i].ToNamedProto(trainer.variables()[i].name());
  }
  for (v1::NamedTensor& slot : trainer.optimizer().SaveState()) {
    *c.add_optimizer_slots() = std::move(slot);
  }
  return c;
}

::testing::AssertionResult SameWeights(const std::vector<Tensor>& got,
                                       const std::vector<Tensor>& want, double rel) {
  if (got.size() != want.size() || want.empty()) {
    return ::testing::AssertionFailure() << got.size() << " tensors, want " << want.size();
  }
  for (size_t t = 0; t < want.size(); ++t) {
    const Tensor& g = got[t];
    const Tensor& w = want[t];
    if (g.dtype() != w.dtype() || g.shape() != w.shape()) {
      return ::testing::AssertionFailure()
             << "tensor " << t << ": " << g.DebugString() << ", want " << w.DebugString();
    }
    if (rel == 0) {
      if (std::memcmp(g.raw_data(), w.raw_data(), w.num_bytes()) != 0) {
        for (int64_t i = 0; i < w.num_elements(); ++i) {
          if (g.AsDouble(i) != w.AsDouble(i)) {
            return ::testing::AssertionFailure()
                   << "tensor " << t << " element " << i << ": " << g.AsDouble(i) << ", want "
                   << w.AsDouble(i) << " bit for bit";
          }
        }
      }
      continue;
    }
    double mean = 0;
    for (int64_t i = 0; i < w.num_elements(); ++i) mean += std::fabs(w.AsDouble(i));
    mean /= std::max<int64_t>(1, w.num_elements());
    for (int64_t i = 0; i < w.num_elements(); ++i) {
      const double a = g.AsDouble(i), b = w.AsDouble(i);
      if (!(std::fabs(a - b) <= rel * (std::fabs(b) + mean))) {
        return ::testing::AssertionFailure() << "tensor " << t << " element " << i << ": " << a
                                             << ", want " << b << " within " << rel;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace lockstep::distribute
