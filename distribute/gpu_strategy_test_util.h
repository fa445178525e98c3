// Test helpers shared by the GPU strategy tests (gpu_strategy_test on fake GPUs,
// gpu_strategy_cuda_test on a real one): the digits MLP (64 features, dense 32 + ReLU, dense
// 10, sparse softmax cross-entropy with label smoothing), a deterministic learnable batch per
// step, and training it through any strategy's Trainer.
#ifndef LOCKSTEP_DISTRIBUTE_GPU_STRATEGY_TEST_UTIL_H_
#define LOCKSTEP_DISTRIBUTE_GPU_STRATEGY_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/strategy.h"
#include "distribute/trainer.h"
#include "engine/graph.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep::distribute {

inline constexpr int kDigitsSteps = 20;
inline constexpr int64_t kDigitsGlobalBatch = 64;

struct TrainedRun {
  std::vector<engine::Tensor> weights;  // on the host, in the trainer's variable order
  std::vector<double> losses;           // per step
};

engine::Graph DigitsGraph();
// SGD (or momentum 0.9) at `learning_rate`, global batch kDigitsGlobalBatch, overlapped.
TrainerOptions DigitsTrainerOptions(double learning_rate, bool momentum = false);
// Step `step`'s global batch: 64 pixels in [0, 1] per example, a label they determine.
std::vector<engine::Tensor> DigitsBatch(int64_t batch, int64_t step);
// Steps [first, first + n) of `trainer`, each batch split among the strategy's replicas;
// each step's loss appended to *losses when not null. A trainer accumulating K micro-batches
// gets K batches per step (step s: batches s*K .. s*K + K-1).
absl::Status TrainSteps(Strategy& strategy, Trainer& trainer, int first, int n,
                        std::vector<double>* losses = nullptr,
                        int64_t global_batch = kDigitsGlobalBatch);
// A fresh trainer on `strategy` trained `steps` steps, accumulating `accumulation_steps`
// micro-batches per step (failures are test failures: the result is then empty).
TrainedRun TrainDigits(Strategy& strategy, int steps, double learning_rate = 0.1,
                       int64_t global_batch = kDigitsGlobalBatch, int accumulation_steps = 1,
                       bool momentum = false);
// The trainer's variables and optimizer slots on the host, as a worker checkpoints them.
absl::StatusOr<v1::Checkpoint> MakeCheckpoint(const Trainer& trainer);
// Every tensor of `got` equals `want`'s within `rel` relative (0: bit for bit), element
// against element, with a floor of the tensor's mean magnitude.
::testing::AssertionResult SameWeights(const std::vector<engine::Tensor>& got,
                                       const std::vector<engine::Tensor>& want, double rel);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_GPU_STRATEGY_TEST_UTIL_H_
