#include "examples/local_trainer.h"

#include "common/status.h"
#include "data/dataset.h"
#include "engine/model_builder.h"

namespace lockstep::examples {

absl::StatusOr<std::unique_ptr<LocalTrainer>> LocalTrainer::Create(
    const v1::ModelSpec& model, const v1::OptimizerSpec& optimizer) {
  std::unique_ptr<LocalTrainer> t(new LocalTrainer());
  t->spec_ = model;
  LS_ASSIGN_OR_RETURN(engine::Graph graph, engine::BuildModel(model));
  t->graph_ = std::make_unique<engine::Graph>(std::move(graph));
  LS_ASSIGN_OR_RETURN(t->variables_, engine::VariableSet::Initialize(*t->graph_));
  LS_ASSIGN_OR_RETURN(t->executor_, engine::Executor::Create(t->graph_.get()));
  LS_ASSIGN_OR_RETURN(t->optimizer_, engine::Optimizer::Create(optimizer, t->graph_->Variables()));
  return t;
}

absl::Status LocalTrainer::Train(const data::Element& train, int epochs, int batch_size,
                                 const std::function<void(const EpochStats&)>& on_epoch) {
  return Run(train, epochs, /*max_steps=*/-1, batch_size, on_epoch);
}

absl::Status LocalTrainer::TrainSteps(const data::Element& train, int64_t steps, int batch_size,
                                      const std::function<void(const EpochStats&)>& on_epoch) {
  const int64_t n = train.features.shape().dim(0);
  const int64_t steps_per_epoch = (n + batch_size - 1) / batch_size;
  return Run(train, (steps + steps_per_epoch - 1) / steps_per_epoch, steps, batch_size, on_epoch);
}

absl::Status LocalTrainer::Run(const data::Element& train, int64_t epochs, int64_t max_steps,
                               int batch_size,
                               const std::function<void(const EpochStats&)>& on_epoch) {
  const int64_t n = train.features.shape().dim(0);
  const int64_t steps_per_epoch = (n + batch_size - 1) / batch_size;
  data::Dataset ds = data::Dataset::FromTensors(train.features, train.labels)
                         .Shuffle(n, spec_.seed())
                         .Batch(batch_size, /*drop_remainder=*/false)
                         .Repeat(epochs)
                         .Prefetch(2);
  LS_ASSIGN_OR_RETURN(auto it, ds.MakeIterator());
  std::vector<engine::Tensor> grads;
  EpochStats stats;
  data::Element batch;
  for (int64_t step = 0; max_steps < 0 || step < max_steps; ++step) {
    LS_ASSIGN_OR_RETURN(bool more, it->Next(&batch));
    if (!more) break;
    engine::StepOptions options;
    options.step = step;
    LS_ASSIGN_OR_RETURN(
        engine::StepResult r,
        executor_->ComputeGradients(variables_.tensors(),
                                    {{"features", batch.features}, {"labels", batch.labels}},
                                    options, &grads));
    LS_RETURN_IF_ERROR(optimizer_->Apply(grads, &variables_.tensors()));
    stats.mean_loss += r.loss;
    stats.train_accuracy += r.accuracy;
    ++stats.steps;
    if (stats.steps == steps_per_epoch) {
      stats.mean_loss /= stats.steps;
      stats.train_accuracy /= stats.steps;
      if (on_epoch) on_epoch(stats);
      stats = EpochStats{stats.epoch + 1};
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::StepResult> LocalTrainer::Evaluate(const data::Element& test) {
  return executor_->Evaluate(variables_.tensors(),
                             {{"features", test.features}, {"labels", test.labels}});
}

absl::StatusOr<double> LocalTrainer::Accuracy(const data::Element& test) {
  LS_ASSIGN_OR_RETURN(engine::StepResult r, Evaluate(test));
  return r.accuracy;
}

absl::StatusOr<double> LocalTrainer::Loss(const data::Element& test) {
  LS_ASSIGN_OR_RETURN(engine::StepResult r, Evaluate(test));
  return r.loss;
}

}  // namespace lockstep::examples
