#include "worker/job_input.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"

namespace lockstep::worker {
namespace {

v1::JobSpec DigitsSpec(double eval_fraction) {
  v1::JobSpec spec;
  v1::DataSource* train = spec.mutable_data()->mutable_train();
  train->add_files("examples/data/digits.csv.gz");
  train->set_feature_scale(0.0625f);
  spec.mutable_data()->set_eval_fraction(eval_fraction);
  spec.set_seed(11);
  return spec;
}

// `spec` completed into a job (a model, optimizer, batch and steps where it gives none) and
// lowered as the coordinator lowers it: the input the worker builds from the plan it gets.
absl::StatusOr<JobInput> Build(v1::JobSpec spec) {
  const v1::JobSpec data_only = spec;
  if (!spec.has_model()) {
    spec.mutable_model()->add_input_shape(64);
    spec.mutable_model()->add_layers()->mutable_dense()->set_units(10);
    spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  }
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  if (spec.global_batch_size() == 0) spec.set_global_batch_size(48);
  spec.set_steps(1);
  absl::StatusOr<v1::JobPlan> plan = jobspec::LowerJobSpec(spec, jobspec::ClusterFacts{});
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return plan.status();
  return BuildJobInput(data_only, plan->input());
}

distribute::Batch First(const JobInput& input, distribute::ShardSpec shard, int64_t batch) {
  auto it = input.train.make(shard, batch);
  EXPECT_TRUE(it.ok()) << it.status();
  auto b = (*it)->Next();
  EXPECT_TRUE(b.ok() && b->has_value());
  return **b;
}

// DATA sharding `index` of `n` over `files` (fields by name: ShardSpec may grow).
distribute::ShardSpec DataShard(int n, int index, std::vector<std::string> files = {}) {
  distribute::ShardSpec shard;
  shard.files = std::move(files);
  shard.num_shards = n;
  shard.shard_index = index;
  return shard;
}

TEST(JobInput, HeldOutSplitIsDeterministicBySeed) {
  auto a = Build(DigitsSpec(0.2));
  auto b = Build(DigitsSpec(0.2));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(a->eval.has_value());
  EXPECT_EQ(a->eval->features.shape().dim(0), 359);
  EXPECT_EQ(a->train_examples, 1797 - 359);
  EXPECT_TRUE(a->eval->features.BitwiseEquals(b->eval->features));
  EXPECT_TRUE(a->train.files.empty()) << "in memory: no files to shard";
}

TEST(JobInput, DataShardingSlicesTheSameGlobalBatch) {
  auto input = Build(DigitsSpec(0.2));
  ASSERT_TRUE(input.ok()) << input.status();
  const distribute::Batch whole = First(*input, DataShard(1, 0), 8);
  const distribute::Batch first = First(*input, DataShard(2, 0), 4);
  const distribute::Batch second = First(*input, DataShard(2, 1), 4);
  ASSERT_EQ(whole[1].num_elements(), 8);
  ASSERT_EQ(first[1].num_elements(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(first[1].data<int64_t>()[i], whole[1].data<int64_t>()[i]);
    EXPECT_EQ(second[1].data<int64_t>()[i], whole[1].data<int64_t>()[4 + i]);
  }
}

// The epoch TrainEpochOf announces is the one the pipeline makes: 1438 training examples
// do not divide by 48, each epoch drops its last 46 and starts over after 29 steps (not
// after 1438 / 48 = 29.96), over several epochs, with and without DATA sharding.
TEST(JobInput, AnEpochIsTheStepsThePipelineRunsBeforeStartingOver) {
  v1::JobSpec spec = DigitsSpec(0.2);
  spec.mutable_data()->set_no_shuffle(true);  // so that every epoch starts with the same rows
  auto input = Build(spec);
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_EQ(input->train_examples, 1438);
  for (const auto& [shard, batch] :
       {std::pair(DataShard(1, 0), int64_t{48}), std::pair(DataShard(2, 1), int64_t{24})}) {
    const TrainEpoch epoch = TrainEpochOf(*input, shard, batch);
    EXPECT_EQ(epoch.steps_per_epoch, 29);
    EXPECT_EQ(epoch.examples_per_step, 48) << "a step consumes the global batch of the set";
    auto it = input->train.make(shard, batch);
    ASSERT_TRUE(it.ok()) << it.status();
    std::vector<distribute::Batch> batches;
    for (int64_t step = 0; step < 3 * epoch.steps_per_epoch + 1; ++step) {
      auto b = (*it)->Next();
      ASSERT_TRUE(b.ok() && b->has_value());
      batches.push_back(**b);
    }
    for (int64_t step = 1; step < static_cast<int64_t>(batches.size()); ++step) {
      const bool epoch_start = step % epoch.steps_per_epoch == 0;
      EXPECT_EQ(batches[step][0].BitwiseEquals(batches[0][0]), epoch_start)
          << "step " << step << " of shard " << shard.shard_index << "/" << shard.num_shards;
    }
  }
  // Streamed files: the size of an epoch is not known.
  auto streamed = Build(DigitsSpec(0));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(TrainEpochOf(*streamed, DataShard(1, 0, streamed->train.files), 48).steps_per_epoch,
            -1);
}

TEST(JobInput, StreamedCsvIsScaledAndBatched) {
  auto input = Build(DigitsSpec(0));
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_FALSE(input->eval.has_value());
  ASSERT_EQ(input->train.files.size(), 1u);
  const distribute::Batch b = First(*input, DataShard(1, 0, input->train.files), 8);
  ASSERT_EQ(b[0].shape().dim(0), 8);
  EXPECT_EQ(b[0].shape().dim(1), 64);
  for (int64_t i = 0; i < b[0].num_elements(); ++i) {
    ASSERT_LE(b[0].data<float>()[i], 1.0f);
    ASSERT_GE(b[0].data<float>()[i], 0.0f);
  }
}

// The bundled TFRecord digits (examples/data/digits-*-of-00003.tfrecord, made from the CSV
// by tools/make_digits_tfrecord.py): pixels as INT64, label INT64.
v1::JobSpec TfRecordDigitsSpec(double eval_fraction) {
  v1::JobSpec spec = DigitsSpec(eval_fraction);
  v1::DataSource* train = spec.mutable_data()->mutable_train();
  train->clear_files();
  for (int i = 0; i < 3; ++i) {
    train->add_files(absl::StrCat("examples/data/digits-0000", i, "-of-00003.tfrecord"));
  }
  train->set_format(v1::DataSource::TFRECORD);
  v1::TfRecordFeature* pixels = train->mutable_tfrecord()->add_features();
  pixels->set_name("pixels");
  pixels->add_shape(64);
  pixels->set_dtype(v1::TfRecordFeature::INT64);
  train->mutable_tfrecord()->mutable_label()->set_name("label");
  train->mutable_tfrecord()->mutable_label()->set_dtype(v1::TfRecordFeature::INT64);
  return spec;
}

// The TFRecord files hold the CSV's rows in its order: the held-out split, and so every
// batch, is the CSV job's.
TEST(JobInput, TfRecordDigitsAreTheCsvDigits) {
  auto csv = Build(DigitsSpec(0.2));
  auto tfrecord = Build(TfRecordDigitsSpec(0.2));
  ASSERT_TRUE(csv.ok()) << csv.status();
  ASSERT_TRUE(tfrecord.ok()) << tfrecord.status();
  EXPECT_EQ(tfrecord->train_examples, 1438);
  ASSERT_TRUE(tfrecord->eval.has_value());
  EXPECT_TRUE(tfrecord->eval->features.BitwiseEquals(csv->eval->features));
  EXPECT_TRUE(tfrecord->eval->labels.BitwiseEquals(csv->eval->labels));
  const distribute::Batch a = First(*csv, DataShard(1, 0), 16);
  const distribute::Batch b = First(*tfrecord, DataShard(1, 0), 16);
  EXPECT_TRUE(a[0].BitwiseEquals(b[0]));
  EXPECT_TRUE(a[1].BitwiseEquals(b[1]));
}

// Streamed (no held-out split), the worker reads the files the strategy hands it: with
// FILE sharding, worker 1 of 3 reads the second file, rows 599.. of the CSV.
TEST(JobInput, StreamedTfRecordReadsTheFilesOfItsShard) {
  v1::JobSpec spec = TfRecordDigitsSpec(0);
  spec.mutable_data()->set_no_shuffle(true);
  auto input = Build(spec);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(input->train_examples, -1);
  ASSERT_EQ(input->train.files.size(), 3u);
  distribute::ShardSpec file_shard;
  file_shard.files = {input->train.files[1]};
  file_shard.num_file_shards = 3;
  file_shard.file_shard_index = 1;
  const distribute::Batch shard = First(*input, file_shard, 4);

  v1::JobSpec csv_spec = DigitsSpec(0);
  csv_spec.mutable_data()->set_no_shuffle(true);
  auto csv = Build(csv_spec);
  ASSERT_TRUE(csv.ok()) << csv.status();
  const distribute::Batch rows = First(*csv, DataShard(1, 0, csv->train.files), 603);
  ASSERT_EQ(shard[0].shape(), (engine::Shape{4, 64}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(shard[1].data<int64_t>()[i], rows[1].data<int64_t>()[599 + i]) << "row " << i;
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(shard[0].data<float>()[i * 64 + j], rows[0].data<float>()[(599 + i) * 64 + j]);
    }
  }
}

// A record that does not match the spec fails the pipeline naming the file, the record
// and the feature.
TEST(JobInput, TfRecordExamplesThatDoNotMatchTheSpecNameTheFeature) {
  v1::JobSpec spec = TfRecordDigitsSpec(0.2);
  spec.mutable_data()->mutable_train()->mutable_tfrecord()->mutable_features(0)->set_dtype(
      v1::TfRecordFeature::FLOAT);
  auto input = Build(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(input.status())) << input.status();
  EXPECT_THAT(std::string(input.status().message()),
              ::testing::AllOf(::testing::HasSubstr("digits-00000-of-00003.tfrecord: record 0"),
                               ::testing::HasSubstr("feature 'pixels' holds an int64_list")));
}

TEST(JobInput, SyntheticDataNeedsNoFiles) {
  v1::JobSpec spec;
  spec.mutable_model()->add_input_shape(5);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(3);
  spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec.mutable_data()->mutable_train()->set_synthetic_examples(6);
  spec.set_global_batch_size(6);
  auto input = Build(spec);
  ASSERT_TRUE(input.ok()) << input.status();
  const distribute::Batch b = First(*input, DataShard(1, 0), 6);
  EXPECT_EQ(b[0].shape().dim(1), 5);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_GE(b[1].data<int64_t>()[i], 0);
    EXPECT_LT(b[1].data<int64_t>()[i], 3);
  }
}

// The plan decides the evaluation data, not the spec's fields: the worker holds out what the
// plan says (a plan made by hand here: the lowering would hold nothing out of this spec).
TEST(JobInput, TheEvaluationDataIsThePlans) {
  const v1::JobSpec spec = DigitsSpec(0);
  v1::InputPlan plan;
  plan.set_eval(v1::InputPlan::HELD_OUT);
  plan.set_eval_fraction(0.2);
  plan.set_auto_shard_policy(v1::AUTO);
  auto held_out = BuildJobInput(spec, plan);
  ASSERT_TRUE(held_out.ok()) << held_out.status();
  EXPECT_EQ(held_out->train_examples, 1438);
  ASSERT_TRUE(held_out->eval.has_value());
  EXPECT_EQ(held_out->eval->features.shape().dim(0), 1797 - 1438);
  plan.set_eval(v1::InputPlan::NONE);
  auto streamed = BuildJobInput(DigitsSpec(0.2), plan);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_FALSE(streamed->eval.has_value());
  EXPECT_EQ(streamed->train_examples, -1);
}

TEST(JobInput, TheJobsStepsAreItsStepsOrItsEpochsOfWholeSteps) {
  v1::JobSpec spec;
  spec.set_global_batch_size(10);
  spec.mutable_optimizer()->set_gradient_accumulation_steps(3);  // a step takes 30 examples
  JobInput input;
  input.train_examples = 95;
  spec.set_steps(7);
  EXPECT_EQ(BatchesPerStep(spec), 3);
  EXPECT_EQ(*TotalSteps(spec, input), 7);
  spec.set_steps(0);
  spec.set_epochs(2);
  EXPECT_EQ(*TotalSteps(spec, input), 6);  // 3 whole steps per epoch, the 5 left dropped
  spec.mutable_optimizer()->set_gradient_accumulation_steps(0);
  EXPECT_EQ(BatchesPerStep(spec), 1);
  EXPECT_EQ(*TotalSteps(spec, input), 18);
}

TEST(JobInput, EpochsOfAnUnknownOrTooSmallTrainingSetNameTheField) {
  v1::JobSpec spec;
  spec.set_global_batch_size(10);
  spec.set_epochs(1);
  JobInput input;  // streamed: size unknown (-1)
  absl::StatusOr<int64_t> steps = TotalSteps(spec, input);
  EXPECT_TRUE(absl::IsInvalidArgument(steps.status())) << steps.status();
  EXPECT_THAT(steps.status().message(), ::testing::HasSubstr("epochs"));
  input.train_examples = 9;
  EXPECT_TRUE(absl::IsInvalidArgument(TotalSteps(spec, input).status()));
}

}  // namespace
}  // namespace lockstep::worker
