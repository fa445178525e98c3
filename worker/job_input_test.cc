#include "worker/job_input.h"

#include <string>

#include "gtest/gtest.h"

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

distribute::Batch First(const JobInput& input, distribute::ShardSpec shard, int64_t batch) {
  auto it = input.train.make(shard, batch);
  EXPECT_TRUE(it.ok()) << it.status();
  auto b = (*it)->Next();
  EXPECT_TRUE(b.ok() && b->has_value());
  return **b;
}

TEST(JobInput, HeldOutSplitIsDeterministicBySeed) {
  auto a = BuildJobInput(DigitsSpec(0.2));
  auto b = BuildJobInput(DigitsSpec(0.2));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(a->eval.has_value());
  EXPECT_EQ(a->eval->features.shape().dim(0), 359);
  EXPECT_EQ(a->train_examples, 1797 - 359);
  EXPECT_TRUE(a->eval->features.BitwiseEquals(b->eval->features));
  EXPECT_TRUE(a->train.files.empty()) << "in memory: no files to shard";
}

TEST(JobInput, DataShardingSlicesTheSameGlobalBatch) {
  auto input = BuildJobInput(DigitsSpec(0.2));
  ASSERT_TRUE(input.ok()) << input.status();
  const distribute::Batch whole = First(*input, {{}, 1, 0}, 8);
  const distribute::Batch first = First(*input, {{}, 2, 0}, 4);
  const distribute::Batch second = First(*input, {{}, 2, 1}, 4);
  ASSERT_EQ(whole[1].num_elements(), 8);
  ASSERT_EQ(first[1].num_elements(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(first[1].data<int64_t>()[i], whole[1].data<int64_t>()[i]);
    EXPECT_EQ(second[1].data<int64_t>()[i], whole[1].data<int64_t>()[4 + i]);
  }
}

TEST(JobInput, StreamedCsvIsScaledAndBatched) {
  auto input = BuildJobInput(DigitsSpec(0));
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_FALSE(input->eval.has_value());
  ASSERT_EQ(input->train.files.size(), 1u);
  const distribute::Batch b = First(*input, {input->train.files, 1, 0}, 8);
  ASSERT_EQ(b[0].shape().dim(0), 8);
  EXPECT_EQ(b[0].shape().dim(1), 64);
  for (int64_t i = 0; i < b[0].num_elements(); ++i) {
    ASSERT_LE(b[0].data<float>()[i], 1.0f);
    ASSERT_GE(b[0].data<float>()[i], 0.0f);
  }
}

TEST(JobInput, SyntheticDataNeedsNoFiles) {
  v1::JobSpec spec;
  spec.mutable_model()->add_input_shape(5);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(3);
  spec.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec.set_global_batch_size(6);
  auto input = BuildJobInput(spec);
  ASSERT_TRUE(input.ok()) << input.status();
  const distribute::Batch b = First(*input, {{}, 1, 0}, 6);
  EXPECT_EQ(b[0].shape().dim(1), 5);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_GE(b[1].data<int64_t>()[i], 0);
    EXPECT_LT(b[1].data<int64_t>()[i], 3);
  }
}

TEST(JobInput, ErrorsNameTheField) {
  v1::JobSpec spec;
  auto none = BuildJobInput(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(none.status()));
  EXPECT_NE(none.status().message().find("data.train.files"), absl::string_view::npos);
  v1::JobSpec bad_fraction = DigitsSpec(1.5);
  auto fraction = BuildJobInput(bad_fraction);
  EXPECT_NE(fraction.status().message().find("data.eval_fraction"), absl::string_view::npos);
}

}  // namespace
}  // namespace lockstep::worker
