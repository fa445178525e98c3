#include "distribute/data_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "distribute/mirrored_strategy.h"

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;
using ::testing::ElementsAre;

data::Dataset Examples(int64_t n) {
  std::vector<float> f;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    f.push_back(i);
    f.push_back(-i);
    labels.push_back(i);
  }
  return data::Dataset::FromTensors(Tensor::FromVector<float>(f, Shape{n, 2}),
                                    Tensor::FromVector<int64_t>(labels, Shape{n}));
}

TEST(DataSourceTest, MirroredSplitsDataBatchesPerReplica) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = 2;
  auto strategy = MirroredStrategy::Create(options);
  ASSERT_TRUE(strategy.ok());
  auto dataset = (*strategy)->ExperimentalDistributeDataset(DataDatasetSource(Examples(10)), 4);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  std::vector<std::vector<int64_t>> labels(2);
  int steps = 0;
  while (true) {
    auto step = (*dataset)->Next();
    ASSERT_TRUE(step.ok()) << step.status();
    if (!step->has_value()) break;
    ASSERT_EQ((*step)->size(), 2u);  // features, labels
    EXPECT_EQ((**step)[0].component(0).shape().dim(1), 2);
    for (int r = 0; r < 2; ++r) {
      for (int64_t x : (**step)[1].component(r).ToVector<int64_t>()) labels[r].push_back(x);
    }
    ++steps;
  }
  EXPECT_EQ(steps, 3);
  EXPECT_THAT(labels[0], ElementsAre(0, 1, 4, 5, 8, 9));
  EXPECT_THAT(labels[1], ElementsAre(2, 3, 6, 7));  // the last step's replica 1 is empty
}

TEST(DataSourceTest, DataShardKeepsThisWorkersElements) {
  DatasetSource source = DataDatasetSource(Examples(6));
  EXPECT_EQ(source.num_files, 0);
  ShardSpec spec;
  spec.num_shards = 2;
  spec.shard_index = 1;
  auto it = source.make(spec, 8);
  ASSERT_TRUE(it.ok()) << it.status();
  auto batch = (*it)->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  EXPECT_THAT((**batch)[1].ToVector<int64_t>(), ElementsAre(1, 3, 5));
  EXPECT_FALSE((*it)->Next()->has_value());
}

}  // namespace
}  // namespace lockstep::distribute
