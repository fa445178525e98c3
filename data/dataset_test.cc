#include "data/dataset.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "gtest/gtest.h"

namespace lockstep::data {
namespace {

// Examples 0..n-1: features [i, 10*i], label i.
Dataset Range(int64_t n) {
  std::vector<float> f;
  std::vector<int64_t> l;
  for (int64_t i = 0; i < n; ++i) {
    f.push_back(i);
    f.push_back(10 * i);
    l.push_back(i);
  }
  return Dataset::FromTensors(engine::Tensor::FromVector(f, engine::Shape{n, 2}),
                              engine::Tensor::FromVector(l, engine::Shape{n}));
}

// The labels of every element, flattened, in order.
std::vector<int64_t> Labels(const Dataset& ds, int64_t position = 0) {
  auto it = ds.MakeIterator(position);
  EXPECT_TRUE(it.ok()) << it.status();
  std::vector<int64_t> out;
  Element e;
  while (true) {
    absl::StatusOr<bool> more = (*it)->Next(&e);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    for (int64_t v : e.labels.ToVector<int64_t>()) out.push_back(v);
  }
  return out;
}

TEST(Dataset, BatchKeepsOrDropsTheRemainder) {
  auto it = *Range(7).Batch(3, false).MakeIterator();
  Element e;
  std::vector<int64_t> sizes;
  while (*it->Next(&e)) sizes.push_back(e.features.shape().dim(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(e.features.shape(), (engine::Shape{1, 2}));
  EXPECT_EQ(e.features.ToVector<float>(), (std::vector<float>{6, 60}));
  EXPECT_EQ(Labels(Range(7).Batch(3, true)).size(), 6u);
}

TEST(Dataset, ShuffleIsASeededPermutationReshuffledPerEpoch) {
  std::vector<int64_t> a = Labels(Range(50).Shuffle(16, 7));
  EXPECT_EQ(a, Labels(Range(50).Shuffle(16, 7)));
  EXPECT_NE(a, Labels(Range(50).Shuffle(16, 8)));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 50u);
  std::vector<int64_t> two = Labels(Range(50).Shuffle(64, 7).Repeat(2));
  ASSERT_EQ(two.size(), 100u);
  EXPECT_NE(std::vector<int64_t>(two.begin(), two.begin() + 50),
            std::vector<int64_t>(two.begin() + 50, two.end()));
  std::vector<int64_t> same = Labels(Range(50).Shuffle(64, 7, false).Repeat(2));
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 50),
            std::vector<int64_t>(same.begin() + 50, same.end()));
}

TEST(Dataset, ShardTakeSkipRepeat) {
  EXPECT_EQ(Labels(Range(10).Shard(3, 1)), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(Labels(Range(10).Skip(7)), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(Labels(Range(10).Take(2).Repeat(3)), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(Labels(Range(10).Repeat().Take(12)).size(), 12u);
  EXPECT_TRUE(Labels(Range(10).Skip(20).Repeat()).empty());  // terminates
}

TEST(Dataset, MapAndNormalize) {
  auto it = *Range(3).Normalize({1.0f, 10.0f}, {2.0f, 5.0f}).Batch(3, false).MakeIterator();
  Element e;
  ASSERT_TRUE(*it->Next(&e));
  EXPECT_EQ(e.features.ToVector<float>(), (std::vector<float>{-0.5f, -2, 0, 0, 0.5f, 2}));
  auto failing = Range(3).Map([](Element* e) -> absl::Status {
    if (e->labels.data<int64_t>()[0] == 2) return absl::InvalidArgumentError("boom");
    return absl::OkStatus();
  });
  auto it2 = *failing.MakeIterator();
  EXPECT_TRUE(*it2->Next(&e));
  EXPECT_TRUE(*it2->Next(&e));
  EXPECT_EQ(it2->Next(&e).status().message(), "boom");
}

TEST(Dataset, PrefetchYieldsTheSameElements) {
  Dataset base = Range(100).Shuffle(32, 3).Batch(8, false);
  EXPECT_EQ(Labels(base.Prefetch(3)), Labels(base));
  // Destroying a prefetching iterator early stops its thread.
  auto it = *Range(1000).Repeat().Prefetch(4).MakeIterator();
  Element e;
  EXPECT_TRUE(*it->Next(&e));
}

TEST(Dataset, PositionRestoresTheSameStream) {
  Dataset ds = Range(40).Shuffle(10, 5).Batch(4, true).Repeat(3);
  std::vector<int64_t> all = Labels(ds);
  auto it = *ds.MakeIterator();
  Element e;
  for (int i = 0; i < 13; ++i) ASSERT_TRUE(*it->Next(&e));
  EXPECT_EQ(it->position(), 13);
  std::vector<int64_t> rest = Labels(ds, it->position());
  EXPECT_EQ(rest, std::vector<int64_t>(all.begin() + 13 * 4, all.end()));
  EXPECT_EQ(ds.MakeIterator(1000).status().code(), absl::StatusCode::kOutOfRange);
  // Stages that skip without building elements give the same stream too.
  Dataset plain = Range(10).Normalize({0}, {1}).Batch(3, false).Repeat(2);
  std::vector<int64_t> whole = Labels(plain);
  for (int64_t p = 0; p <= 8; ++p) {
    std::vector<int64_t> tail = Labels(plain, p);
    ASSERT_LE(tail.size(), whole.size());
    EXPECT_EQ(tail, std::vector<int64_t>(whole.end() - tail.size(), whole.end())) << p;
  }
  EXPECT_EQ(Labels(plain, 4),
            std::vector<int64_t>(whole.begin() + 10, whole.end()));  // 4 batches a pass
  EXPECT_EQ(plain.MakeIterator(9).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(Labels(plain, 8).empty());
  Dataset sharded = Range(20).Shard(3, 1).Skip(1).Take(4).Batch(2, false).Repeat(2);
  std::vector<int64_t> s_all = Labels(sharded);
  EXPECT_EQ(s_all, (std::vector<int64_t>{4, 7, 10, 13, 4, 7, 10, 13}));
  EXPECT_EQ(Labels(sharded, 3), (std::vector<int64_t>{10, 13}));
}

// Repeat skips whole passes without making them once it saw one end; the stream resumed
// from any position, many passes in, is the one read through (each pass reshuffled).
TEST(Dataset, PositionManyPassesInRestoresTheSameStream) {
  Dataset ds = Range(40).Shuffle(10, 5).Batch(4, true).Repeat(50);
  const std::vector<int64_t> all = Labels(ds);
  ASSERT_EQ(all.size(), 50u * 40);
  for (int64_t p : {0, 9, 10, 11, 123, 499}) {
    EXPECT_EQ(Labels(ds, p), std::vector<int64_t>(all.begin() + p * 4, all.end())) << p;
  }
  EXPECT_TRUE(Labels(ds, 500).empty());
  EXPECT_EQ(ds.MakeIterator(501).status().code(), absl::StatusCode::kOutOfRange);
  // Through a prefetching stage too, which hands the skip to its producer thread.
  Dataset prefetched = ds.Prefetch(3);
  for (int64_t p : {0, 1, 10, 123, 499}) {
    EXPECT_EQ(Labels(prefetched, p), std::vector<int64_t>(all.begin() + p * 4, all.end())) << p;
  }
  EXPECT_EQ(prefetched.MakeIterator(501).status().code(), absl::StatusCode::kOutOfRange);
  // A skip after some reads, past what is buffered.
  auto it = *prefetched.MakeIterator();
  Element e;
  ASSERT_TRUE(*it->Next(&e));
  ASSERT_TRUE(it->SkipTo(200).ok());
  ASSERT_TRUE(*it->Next(&e));
  EXPECT_EQ(e.labels.ToVector<int64_t>()[0], all[200 * 4]);
}

TEST(Dataset, ShardFilesSplitsTheSourceFiles) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::vector<std::string> files;
  for (int f = 0; f < 3; ++f) {
    files.push_back(std::string(dir ? dir : "/tmp") + "/dataset_test_" + std::to_string(f) +
                    ".csv");
    std::FILE* out = std::fopen(files.back().c_str(), "w");
    std::fprintf(out, "0.5,%d\n1.5,%d\n", f * 10, f * 10 + 1);
    std::fclose(out);
  }
  Dataset ds = Dataset::Csv(files).Batch(1, false);
  EXPECT_EQ(ds.num_files(), 3);
  EXPECT_EQ(Labels(ds.ShardFiles(2, 0)), (std::vector<int64_t>{0, 1, 20, 21}));
  EXPECT_EQ(Labels(ds.ShardFiles(2, 1)), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(ds.ShardFiles(4, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Range(4).ShardFiles(2, 0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Dataset, SyntheticIsDeterministic) {
  Dataset ds = Dataset::Synthetic(10, engine::Shape{2, 3}, 4, 9).Batch(10, false);
  auto a = *ds.MakeIterator();
  auto b = *ds.MakeIterator();
  Element x, y;
  ASSERT_TRUE(*a->Next(&x));
  ASSERT_TRUE(*b->Next(&y));
  EXPECT_EQ(x.features.shape(), (engine::Shape{10, 2, 3}));
  EXPECT_TRUE(x.features.BitwiseEquals(y.features));
  EXPECT_TRUE(x.labels.BitwiseEquals(y.labels));
  for (int64_t l : x.labels.ToVector<int64_t>()) EXPECT_TRUE(l >= 0 && l < 4);
  EXPECT_EQ(Labels(Dataset::Synthetic(10, engine::Shape{1}, 4, 9), 7).size(), 3u);
  EXPECT_EQ(Dataset::Synthetic(10, engine::Shape{-1}, 4, 9).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Element, SplitBatchForReplicas) {
  Element batch;
  ASSERT_TRUE(*(*Range(7).Batch(7, false).MakeIterator())->Next(&batch));
  std::vector<Element> parts = SplitBatch(batch, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].labels.ToVector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parts[2].labels.ToVector<int64_t>(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(parts[2].features.shape(), (engine::Shape{2, 2}));
  std::vector<Element> sparse = SplitBatch(Rows(batch, 0, 1), 2);
  EXPECT_EQ(sparse[1].features.shape(), (engine::Shape{0, 2}));
}

TEST(Dataset, BadArgumentsSurfaceAtMakeIterator) {
  EXPECT_EQ(Range(4).Batch(0, false).MakeIterator().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(4).Shard(2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(4).Shuffle(0, 1).Batch(2, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(4).Normalize({1}, {0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dataset::FromTensors(engine::Tensor::Zeros(DType::kF32, engine::Shape{3, 2}),
                                 engine::Tensor::Zeros(DType::kI64, engine::Shape{4}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::data
