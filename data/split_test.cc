#include "data/split.h"

#include <set>

#include "gtest/gtest.h"

namespace lockstep::data {
namespace {

TEST(Split, DeterministicDisjointSplit) {
  std::vector<float> f;
  std::vector<int64_t> l;
  for (int i = 0; i < 101; ++i) {
    f.push_back(i);
    l.push_back(i);
  }
  Dataset ds = Dataset::FromTensors(engine::Tensor::FromVector(f, engine::Shape{101, 1}),
                                    engine::Tensor::FromVector(l, engine::Shape{101}));
  auto all = ReadAll(ds);
  ASSERT_TRUE(all.ok()) << all.status();
  auto a = *TrainTestSplit(*all, 0.2, 42);
  auto b = *TrainTestSplit(*all, 0.2, 42);
  EXPECT_EQ(a.first.labels.shape().dim(0), 81);
  EXPECT_EQ(a.second.labels.shape().dim(0), 20);
  EXPECT_TRUE(a.second.labels.BitwiseEquals(b.second.labels));
  std::set<int64_t> seen;
  for (int64_t v : a.first.labels.ToVector<int64_t>()) seen.insert(v);
  for (int64_t v : a.second.labels.ToVector<int64_t>()) seen.insert(v);
  EXPECT_EQ(seen.size(), 101u);
  EXPECT_FALSE(a.second.labels.BitwiseEquals(TrainTestSplit(*all, 0.2, 43)->second.labels));
  EXPECT_EQ(TrainTestSplit(*all, 1.5, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::data
