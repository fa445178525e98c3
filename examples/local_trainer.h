// LocalTrainer: trains a model on one replica in this process (no cluster): the smallest
// complete use of the engine and data APIs, used by `bazel run //examples:train_digits`
// and the accuracy tests. It is the single-replica case of what the distribute layer
// does per replica: ComputeGradients, (no all-reduce), Optimizer::Apply.
//
// Ownership: owns its graph, variables, executor and optimizer. Thread model: one thread.
#ifndef LOCKSTEP_EXAMPLES_LOCAL_TRAINER_H_
#define LOCKSTEP_EXAMPLES_LOCAL_TRAINER_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "data/element.h"
#include "engine/executor.h"
#include "engine/graph.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::examples {

struct EpochStats {
  int epoch = 0;
  double mean_loss = 0;       // over the epoch's batches
  double train_accuracy = 0;  // over the epoch's batches, before each update
  int64_t steps = 0;
};

class LocalTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<LocalTrainer>> Create(const v1::ModelSpec& model,
                                                              const v1::OptimizerSpec& optimizer);

  // Trains for `epochs` passes over `train` in shuffled batches (seeded by the model
  // seed), calling on_epoch after each.
  absl::Status Train(const data::Element& train, int epochs, int batch_size,
                     const std::function<void(const EpochStats&)>& on_epoch);
  // The same for `steps` batches (a job's `steps`), the last epoch possibly partial (no
  // on_epoch for it).
  absl::Status TrainSteps(const data::Element& train, int64_t steps, int batch_size,
                          const std::function<void(const EpochStats&)>& on_epoch);
  // Fraction of `test` classified correctly.
  absl::StatusOr<double> Accuracy(const data::Element& test);
  // Mean loss on `test` (for sequence logits: per position), forward only.
  absl::StatusOr<double> Loss(const data::Element& test);

  const engine::VariableSet& variables() const { return variables_; }

 private:
  LocalTrainer() = default;
  absl::StatusOr<engine::StepResult> Evaluate(const data::Element& test);
  // Train's loop: `epochs` passes, stopping after `max_steps` batches when that is >= 0.
  absl::Status Run(const data::Element& train, int64_t epochs, int64_t max_steps, int batch_size,
                   const std::function<void(const EpochStats&)>& on_epoch);

  v1::ModelSpec spec_;
  std::unique_ptr<engine::Graph> graph_;
  engine::VariableSet variables_;
  std::unique_ptr<engine::Executor> executor_;
  std::unique_ptr<engine::Optimizer> optimizer_;
};

}  // namespace lockstep::examples

#endif  // LOCKSTEP_EXAMPLES_LOCAL_TRAINER_H_
