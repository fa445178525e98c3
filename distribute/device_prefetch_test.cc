// A distributed dataset on a fake GPU replica (distribute/fake_gpu_devices.h): its steps come
// staged on the device (pinned memory, a copy stream), in order and with the host path's
// bytes; the prefetch stays bounded; a producer's error reaches Next() with its status;
// destruction with batches in flight and held returns; and the data position a checkpoint
// saves counts the steps handed out, never the ones prefetched behind them.
#include <atomic>
#include <future>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/one_device_strategy.h"
#include "distribute/tensor_math.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::distribute {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(10);

// Waits for `done` with a deadline (no bare sleeps).
bool WaitFor(const std::function<bool()>& done) {
  const absl::Time until = absl::Now() + kDeadline;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Batches of `batch` rows of [row, row + 0.5] features and row labels; `fail_at`: the batch
// (from 0) whose Next answers DATA_LOSS; counts the batches made.
class CountingIterator final : public BatchIterator {
 public:
  CountingIterator(int64_t batch, int fail_at, std::shared_ptr<std::atomic<int>> made)
      : batch_(batch), fail_at_(fail_at), made_(std::move(made)) {}
  absl::StatusOr<std::optional<Batch>> Next() override {
    const int k = made_->fetch_add(1);
    if (k == fail_at_) return absl::DataLossError("record 3 of the test source is corrupt");
    std::vector<float> f;
    std::vector<int64_t> l;
    for (int64_t i = 0; i < batch_; ++i) {
      f.push_back(static_cast<float>(k * batch_ + i));
      f.push_back(static_cast<float>(k * batch_ + i) + 0.5f);
      l.push_back(k * batch_ + i);
    }
    return std::optional<Batch>(Batch{engine::Tensor::FromVector(f, engine::Shape{batch_, 2}),
                                      engine::Tensor::FromVector(l, engine::Shape{batch_})});
  }

 private:
  const int64_t batch_;
  const int fail_at_;
  std::shared_ptr<std::atomic<int>> made_;
};

class DevicePrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpus = MakeFakeGpus(1, size_t{16} << 20);
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    gpus_ = *std::move(gpus);
    LocalDevices devices;
    devices.num_gpus = 1;
    devices.gpus = gpus_.devices;
    auto strategy = OneDeviceStrategy::Create("/gpu:0", devices);
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    strategy_ = *std::move(strategy);
  }

  std::unique_ptr<DistributedDataset> Dataset(DistributeOptions options, int fail_at = -1) {
    DatasetSource source;
    auto made = made_;
    source.make = [made, fail_at](const ShardSpec&,
                                  int64_t batch) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
      return std::unique_ptr<BatchIterator>(
          std::make_unique<CountingIterator>(batch, fail_at, made));
    };
    auto ds = strategy_->ExperimentalDistributeDataset(source, /*global_batch_size=*/4, options);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? *std::move(ds) : nullptr;
  }

  // A dataset prefetching 2 steps, with its first step handed out (*held) and the queue full.
  std::unique_ptr<DistributedDataset> HoldingOneWithTheQueueFull(
      absl::StatusOr<std::optional<std::vector<DistributedValues>>>* held) {
    DistributeOptions options;
    options.prefetch = 2;
    auto ds = Dataset(options);
    *held = ds->Next();
    EXPECT_TRUE(held->ok() && (*held)->has_value());
    EXPECT_TRUE(WaitFor([&] { return ds->prefetched() == 2; }));
    return ds;
  }

  // The first feature of each row of a step's features (read back from the device).
  std::vector<float> Rows(const std::vector<DistributedValues>& step) {
    const engine::Tensor& t = step[0].component(0);
    absl::StatusOr<engine::Tensor> host = ToHost(t, gpus_.devices->Find(0));
    EXPECT_TRUE(host.ok()) << host.status();
    std::vector<float> rows;
    for (int64_t i = 0; host.ok() && i < host->shape().dim(0); ++i) {
      rows.push_back(host->data<float>()[2 * i]);
    }
    return rows;
  }

  FakeGpus gpus_;
  std::unique_ptr<OneDeviceStrategy> strategy_;
  std::shared_ptr<std::atomic<int>> made_ = std::make_shared<std::atomic<int>>(0);
};

TEST_F(DevicePrefetchTest, StepsComeStagedOnTheDeviceInOrderThroughPinnedMemory) {
  // Before the dataset exists: its prefetch thread stages (and counts) steps from the start.
  const FakeCudaApi::Counters before = gpus_.api->counters();
  auto ds = Dataset({});
  for (int step = 0; step < 5; ++step) {
    auto next = ds->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_TRUE(next->has_value());
    const std::vector<DistributedValues>& values = **next;
    ASSERT_EQ(values.size(), 2u);
    EXPECT_EQ(values[0].component(0).device(), engine::Device(engine::Device::Type::kCuda, 0));
    EXPECT_EQ(values[1].component(0).device(), engine::Device(engine::Device::Type::kCuda, 0));
    const float first = static_cast<float>(4 * step);
    EXPECT_EQ(Rows(values), std::vector<float>({first, first + 1, first + 2, first + 3}));
    absl::StatusOr<engine::Tensor> labels = ToHost(values[1].component(0), gpus_.devices->Find(0));
    ASSERT_TRUE(labels.ok());
    EXPECT_EQ(labels->data<int64_t>()[3], 4 * step + 3);
  }
  const FakeCudaApi::Counters after = gpus_.api->counters();
  EXPECT_GE(after.pinned_copies - before.pinned_copies, 10) << "two components per step";
  EXPECT_EQ(after.pageable_copies - before.pageable_copies, 10) << "only the test's reads";
}

TEST_F(DevicePrefetchTest, WithoutPrefetchToDeviceStepsStayOnTheHost) {
  DistributeOptions options;
  options.prefetch_to_device = false;
  auto ds = Dataset(options);
  auto next = ds->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_TRUE((**next)[0].component(0).on_host());
}

// The producer runs `prefetch` steps ahead of the consumer and no further.
TEST_F(DevicePrefetchTest, ThePrefetchIsBounded) {
  absl::StatusOr<std::optional<std::vector<DistributedValues>>> held;
  auto ds = HoldingOneWithTheQueueFull(&held);
  ASSERT_TRUE(held.ok() && held->has_value());
  absl::SleepFor(absl::Milliseconds(50));  // room to overrun, were it not bounded
  EXPECT_EQ(made_->load(), 3) << "one handed out, two prefetched";
  EXPECT_EQ(ds->prefetched(), 2);
}

// An error of the input pipeline reaches the consumer, with its status, after the steps
// before it; nothing hangs.
TEST_F(DevicePrefetchTest, AProducerErrorSurfacesOnNextWithItsStatus) {
  auto ds = Dataset({}, /*fail_at=*/2);
  for (int step = 0; step < 2; ++step) {
    auto next = ds->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(Rows(**next)[0], 4.0f * step);
  }
  auto failed = std::async(std::launch::async, [&] { return ds->Next().status(); });
  ASSERT_EQ(failed.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const absl::Status s = failed.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("record 3 of the test source is corrupt"));
}

// Destroying the dataset while steps are queued, staged and held returns; a held step's
// tensors stay readable after it.
TEST_F(DevicePrefetchTest, ShutdownWithStepsInFlightReturnsAndHeldStepsStayValid) {
  absl::StatusOr<std::optional<std::vector<DistributedValues>>> held;
  auto ds = HoldingOneWithTheQueueFull(&held);
  ASSERT_TRUE(held.ok() && held->has_value());
  auto destroyed = std::async(std::launch::async, [&] { ds.reset(); });
  ASSERT_EQ(destroyed.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(Rows(**held), std::vector<float>({0, 1, 2, 3}));
}

// A checkpoint saves steps_returned(): the steps trained on, not the prefetched ones, so a
// dataset that resumes there yields the first step not trained on.
TEST_F(DevicePrefetchTest, TheDataPositionCountsConsumedStepsOnly) {
  DistributeOptions options;
  options.prefetch = 2;
  auto ds = Dataset(options);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(ds->Next().ok());
  ASSERT_TRUE(WaitFor([&] { return ds->prefetched() == 2; }));
  EXPECT_EQ(made_->load(), 5);
  EXPECT_EQ(ds->steps_returned(), 3);
  DistributeOptions resume;
  resume.start_step = ds->steps_returned();
  ds.reset();
  made_->store(0);
  auto resumed = Dataset(resume);
  auto next = resumed->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
  EXPECT_EQ(Rows(**next), std::vector<float>({12, 13, 14, 15}));
  EXPECT_EQ(resumed->steps_returned(), 4);
}

}  // namespace
}  // namespace lockstep::distribute
