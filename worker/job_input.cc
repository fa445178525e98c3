#include "worker/job_input.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/dataset.h"
#include "data/split.h"
#include "distribute/data_source.h"
#include "engine/philox.h"

namespace lockstep {
namespace worker {
namespace {

using distribute::Batch;
using distribute::BatchIterator;
using distribute::ShardSpec;

// The same batch forever (synthetic data).
class RepeatBatchIterator final : public BatchIterator {
 public:
  explicit RepeatBatchIterator(Batch batch) : batch_(std::move(batch)) {}
  absl::StatusOr<std::optional<Batch>> Next() override { return std::optional<Batch>(batch_); }
  absl::StatusOr<int64_t> Skip(int64_t n) override { return n; }

 private:
  const Batch batch_;
};

data::CsvOptions CsvOptionsOf(const v1::DataSource& source) {
  data::CsvOptions options;
  // proto3 cannot tell 0 from unset, and the documented default is the last column: 0 means
  // last (-1). The first column is -(number of columns), counting from the end.
  options.label_column = source.label_column() == 0 ? -1 : source.label_column();
  options.header = source.header();
  return options;
}

data::ExampleFeature ExampleFeatureOf(const v1::TfRecordFeature& f) {
  return {f.name(), engine::Shape(std::vector<int64_t>(f.shape().begin(), f.shape().end())),
          f.dtype() == v1::TfRecordFeature::INT64 ? data::ExampleFeature::Kind::kInt64
                                                  : data::ExampleFeature::Kind::kFloat};
}

data::ExampleOptions ExampleOptionsOf(const v1::DataSource& source) {
  data::ExampleOptions options;
  for (const v1::TfRecordFeature& f : source.tfrecord().features()) {
    options.features.push_back(ExampleFeatureOf(f));
  }
  options.label = ExampleFeatureOf(source.tfrecord().label());
  return options;
}

// The source's files read as its format says (CSV or TFRECORD), features scaled.
data::Dataset SourceDataset(const v1::DataSource& source, std::vector<std::string> files) {
  data::Dataset ds = source.format() == v1::DataSource::TFRECORD
                         ? data::Dataset::TfRecord(std::move(files), ExampleOptionsOf(source))
                         : data::Dataset::Csv(std::move(files), CsvOptionsOf(source));
  if (source.feature_scale() != 0 && source.feature_scale() != 1) {
    ds = ds.Normalize({0.0f}, {1.0f / source.feature_scale()});
  }
  return ds;
}

// Shuffled by (seed, epoch), batched with the remainder dropped, repeated forever. With
// DATA sharding every worker shuffles the whole set identically, batches it by the global
// batch and keeps its own slice of rows of each global batch (tf.distribute's rebatching):
// the global batch of every step is the same whatever the number of workers, so a job's
// weights do not depend on how many workers ran it (within float rounding).
data::Dataset TrainPipeline(data::Dataset ds, const v1::InputPlan& plan, uint64_t seed,
                            const ShardSpec& shard, int64_t batch_size, int64_t shuffle_buffer) {
  if (plan.shuffle()) {
    ds = ds.Shuffle(shuffle_buffer, seed, /*reshuffle_each_iteration=*/true);
  }
  if (shard.num_shards > 1) {
    const int64_t begin = shard.shard_index * batch_size;
    ds = ds.Batch(batch_size * shard.num_shards, /*drop_remainder=*/true)
             .Map([begin, batch_size](data::Element* e) {
               *e = data::Rows(*e, begin, begin + batch_size);
               return absl::OkStatus();
             });
  } else {
    ds = ds.Batch(batch_size, /*drop_remainder=*/true);
  }
  return ds.Repeat(-1).Prefetch(2);
}

absl::StatusOr<JobInput> SyntheticInput(const v1::JobSpec& spec) {
  std::vector<int64_t> dims = {0};
  for (int64_t d : spec.model().input_shape()) dims.push_back(d);
  int64_t classes = 0;
  for (const v1::Layer& layer : spec.model().layers()) {
    if (layer.has_dense()) classes = layer.dense().units();
  }
  if (dims.size() < 2 || classes <= 0) {
    return absl::InvalidArgumentError(
        "data.train.format SYNTHETIC needs model.input_shape and a final dense layer (classes)");
  }
  const uint64_t seed = spec.seed();
  JobInput input;
  input.policy = distribute::AutoShardPolicy::kOff;
  input.train_examples = spec.data().train().synthetic_examples() > 0
                             ? spec.data().train().synthetic_examples()
                             : spec.global_batch_size();
  input.train.make = [dims, classes, seed](
                         const ShardSpec& shard,
                         int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    std::vector<int64_t> shape = dims;
    shape[0] = batch_size;
    engine::Shape fshape(shape);
    std::vector<float> features(fshape.num_elements());
    std::vector<int64_t> labels(batch_size);
    const engine::Philox rng(seed);
    const uint64_t stream = static_cast<uint64_t>(shard.shard_index) * 2;
    for (size_t i = 0; i < features.size(); ++i) {
      features[i] = static_cast<float>(rng.Uniform(i, stream) * 2.0 - 1.0);
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      labels[i] = static_cast<int64_t>(rng.Uniform(i, stream + 1) * classes) % classes;
    }
    return std::unique_ptr<BatchIterator>(std::make_unique<RepeatBatchIterator>(
        Batch{engine::Tensor::FromVector<float>(features, fshape),
              engine::Tensor::FromVector<int64_t>(labels, engine::Shape{batch_size})}));
  };
  return input;
}

}  // namespace

int64_t BatchesPerStep(const v1::JobSpec& spec) {
  return std::max(1, spec.optimizer().gradient_accumulation_steps());
}

absl::StatusOr<int64_t> TotalSteps(const v1::JobSpec& spec, const JobInput& input) {
  if (spec.steps() > 0) return spec.steps();
  const int64_t per_step = spec.global_batch_size() * BatchesPerStep(spec);
  if (input.train_examples < per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epochs: the training set's size is unknown or smaller than one step's batch (",
        input.train_examples, " examples, a step takes ", per_step, "); give steps instead"));
  }
  return spec.epochs() * (input.train_examples / per_step);
}

TrainEpoch TrainEpochOf(const JobInput& input, const distribute::ShardSpec& shard,
                        int64_t batch_size) {
  TrainEpoch epoch;
  // As TrainPipeline batches: the global batch of rows when rebatching, else the worker's.
  epoch.examples_per_step = shard.num_shards > 1 ? batch_size * shard.num_shards : batch_size;
  // FILE sharding reads a subset of the files, whose size is not known here.
  if (epoch.examples_per_step > 0 && input.train_examples >= epoch.examples_per_step &&
      shard.num_file_shards <= 1) {
    epoch.steps_per_epoch = input.train_examples / epoch.examples_per_step;
  }
  return epoch;
}

absl::StatusOr<JobInput> BuildJobInput(const v1::JobSpec& spec, const v1::InputPlan& plan) {
  const v1::DataSpec& data = spec.data();
  if (data.train().format() == v1::DataSource::SYNTHETIC) return SyntheticInput(spec);
  JobInput input;
  switch (plan.auto_shard_policy()) {
    case v1::FILE:
      input.policy = distribute::AutoShardPolicy::kFile;
      break;
    case v1::DATA:
      input.policy = distribute::AutoShardPolicy::kData;
      break;
    case v1::OFF:
      input.policy = distribute::AutoShardPolicy::kOff;
      break;
    default:
      input.policy = distribute::AutoShardPolicy::kAuto;
      break;
  }
  const v1::DataSource train_source = data.train();
  if (plan.eval() == v1::InputPlan::SOURCE) {
    LS_ASSIGN_OR_RETURN(data::Element eval,
                        data::ReadAll(SourceDataset(data.eval(), {data.eval().files().begin(),
                                                                  data.eval().files().end()})));
    input.eval = std::move(eval);
  }
  if (plan.eval() == v1::InputPlan::HELD_OUT) {
    // Held-out split: everything in memory, split by the job seed.
    LS_ASSIGN_OR_RETURN(data::Element all,
                        data::ReadAll(SourceDataset(train_source, {train_source.files().begin(),
                                                                   train_source.files().end()})));
    LS_ASSIGN_OR_RETURN(auto split, data::TrainTestSplit(all, plan.eval_fraction(), spec.seed()));
    input.eval = std::move(split.second);
    data::Element train = std::move(split.first);
    input.train_examples = train.features.shape().dim(0);
    const int64_t n = input.train_examples;
    input.train.make = [train, plan, seed = spec.seed(), n](
                           const ShardSpec& shard,
                           int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
      data::Dataset ds = TrainPipeline(data::Dataset::FromTensors(train.features, train.labels),
                                       plan, seed, shard, batch_size, n);
      LS_ASSIGN_OR_RETURN(auto it, ds.MakeIterator());
      return distribute::AsBatchIterator(std::move(it));
    };
    return input;
  }
  // Streamed files: the strategy may hand this worker a subset (FILE sharding).
  input.train.files = {train_source.files().begin(), train_source.files().end()};
  input.train.make = [train_source, plan, seed = spec.seed()](
                         const ShardSpec& shard,
                         int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    data::Dataset ds =
        TrainPipeline(SourceDataset(train_source, shard.files), plan, seed, shard, batch_size,
                      /*shuffle_buffer=*/4096);
    LS_ASSIGN_OR_RETURN(auto it, ds.MakeIterator());
    return distribute::AsBatchIterator(std::move(it));
  };
  return input;
}

}  // namespace worker
}  // namespace lockstep
