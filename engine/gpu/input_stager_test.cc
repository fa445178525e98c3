// InputStager on FakeCudaApi, whose streams run nothing until synchronised: a missing event
// wait reads stale data every time, so each ordering rule of the stager has a test that fails
// without it. Also its bound (slots), cancellation and errors.
#include "engine/gpu/input_stager.h"

#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "common/cuda/fake_cuda_api.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/device_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {
namespace {

using ::testing::HasSubstr;

constexpr auto kDeadline = std::chrono::seconds(10);

class InputStagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{8} << 20;
    auto fake = FakeCudaApi::Create(options);
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = *std::move(fake);
    auto context = DeviceContext::Create(fake_.get(), 0);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
  }

  // A [rows, 3] f32 batch whose values start at `first`, and its labels.
  static std::vector<Tensor> Batch(int64_t rows, float first) {
    std::vector<float> f(rows * 3);
    std::iota(f.begin(), f.end(), first);
    std::vector<int64_t> l(rows);
    std::iota(l.begin(), l.end(), static_cast<int64_t>(first));
    return {Tensor::FromVector(f, Shape{rows, 3}), Tensor::FromVector(l, Shape{rows})};
  }

  std::vector<float> Read(const Tensor& device) {
    absl::StatusOr<Tensor> host = CopyToHost(*context_, device);
    EXPECT_TRUE(host.ok()) << host.status();
    if (!host.ok()) return {};
    return std::vector<float>(host->data<float>(), host->data<float>() + host->num_elements());
  }

  std::unique_ptr<InputStager> MakeStager(int slots) {
    auto s = InputStager::Create(context_.get(), slots);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::unique_ptr<FakeCudaApi> fake_;
  std::unique_ptr<DeviceContext> context_;
};

TEST_F(InputStagerTest, StagesTheRowsOfEveryComponentFromPinnedMemory) {
  auto stager = MakeStager(2);
  const std::vector<Tensor> batch = Batch(6, 0);
  const FakeCudaApi::Counters before = fake_->counters();
  absl::StatusOr<InputStager::Staged> staged = stager->Stage(batch, 2, 5);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(staged->tensors.size(), 2u);
  EXPECT_EQ(staged->tensors[0].shape(), Shape({3, 3}));
  EXPECT_EQ(staged->tensors[1].shape(), Shape({3}));
  EXPECT_FALSE(staged->tensors[0].on_host());
  ASSERT_TRUE(stager->Ready(staged->slot).ok());
  EXPECT_EQ(Read(staged->tensors[0]), std::vector<float>({6, 7, 8, 9, 10, 11, 12, 13, 14}));
  absl::StatusOr<Tensor> labels = CopyToHost(*context_, staged->tensors[1]);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(labels->data<int64_t>()[0], 2);
  EXPECT_EQ(labels->data<int64_t>()[2], 4);
  const FakeCudaApi::Counters after = fake_->counters();
  EXPECT_EQ(after.pinned_copy_bytes - before.pinned_copy_bytes, 3 * 3 * 4 + 3 * 8u);
  EXPECT_EQ(after.pageable_copies - before.pageable_copies, 2) << "only the two reads back";
}

// The slots' device buffers count in the device's allocator statistics (what a job reports
// as its peak, as torch's max_memory_allocated counts the batch): staging grows bytes in use,
// the peak and the reservation by exactly the slot's bytes, reusing a slot adds nothing, and
// the stager's end gives them back.
TEST_F(InputStagerTest, SlotBytesCountInTheDevicesPeak) {
  const AllocatorStats before = context_->allocator_stats();
  auto stager = MakeStager(2);
  const uint64_t slot_bytes = 4 * 3 * 4 + 4 * 8;  // [4, 3] f32 and [4] i64
  absl::StatusOr<InputStager::Staged> a = stager->Stage(Batch(8, 0), 0, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  // The first batch sizes both slots at once: the peak is reached before the first step.
  const AllocatorStats one = context_->allocator_stats();
  EXPECT_EQ(one.bytes_in_use - before.bytes_in_use, 2 * slot_bytes);
  EXPECT_EQ(one.peak_bytes_in_use - before.peak_bytes_in_use, 2 * slot_bytes);
  EXPECT_EQ(one.bytes_reserved - before.bytes_reserved, 2 * slot_bytes);
  EXPECT_EQ(one.device_allocations, before.device_allocations) << "the cache's, not these";
  absl::StatusOr<InputStager::Staged> b = stager->Stage(Batch(8, 0), 4, 8);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(context_->allocator_stats().peak_bytes_in_use - before.peak_bytes_in_use,
            2 * slot_bytes);
  ASSERT_TRUE(stager->Ready(a->slot).ok());
  ASSERT_TRUE(stager->Ready(b->slot).ok());
  *a = InputStager::Staged();  // slot released, and refilled with a batch no larger
  absl::StatusOr<InputStager::Staged> c = stager->Stage(Batch(8, 0), 0, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(context_->allocator_stats().peak_bytes_in_use - before.peak_bytes_in_use,
            2 * slot_bytes);
  ASSERT_TRUE(stager->Ready(c->slot).ok());
  *b = InputStager::Staged();
  *c = InputStager::Staged();
  stager.reset();
  const AllocatorStats after = context_->allocator_stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.bytes_reserved, before.bytes_reserved);
  EXPECT_EQ(after.peak_bytes_in_use - before.peak_bytes_in_use, 2 * slot_bytes);
}

// Without Ready the compute stream is not ordered after the copy stream: the fake's lazy
// streams leave the copy unrun, and the batch reads as whatever the slot held.
TEST_F(InputStagerTest, AMissingReadyReadsStaleData) {
  auto stager = MakeStager(1);
  absl::StatusOr<InputStager::Staged> staged = stager->Stage(Batch(2, 1), 0, 2);
  ASSERT_TRUE(staged.ok()) << staged.status();
  const std::vector<float> fed = {1, 2, 3, 4, 5, 6};
  EXPECT_NE(Read(staged->tensors[0]), fed) << "read before the copy ran";
  ASSERT_TRUE(stager->Ready(staged->slot).ok());
  EXPECT_EQ(Read(staged->tensors[0]), fed);
}

// A slot is refilled only after the compute stream has read it: the copy stream waits for
// the release. Staging C makes the host wait for B's copy, which (with the wait) first runs
// the compute stream's read of A; without it B's bytes would land before that read.
TEST_F(InputStagerTest, ARefilledSlotWaitsForTheComputeStreamsReads) {
  auto stager = MakeStager(1);
  absl::StatusOr<Tensor> kept = AllocateTensor(*context_, DType::kF32, Shape{2, 3});
  ASSERT_TRUE(kept.ok());
  {
    absl::StatusOr<InputStager::Staged> a = stager->Stage(Batch(2, 100), 0, 2);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(stager->Ready(a->slot).ok());
    ASSERT_TRUE(context_
                    ->CopyOnDevice(kept->raw_device_data(), a->tensors[0].raw_device_data(),
                                   a->tensors[0].num_bytes())
                    .ok());
  }  // A released; the read is enqueued, not run
  ASSERT_TRUE(stager->Stage(Batch(2, 200), 0, 2).ok());  // B, released at once
  absl::StatusOr<InputStager::Staged> c = stager->Stage(Batch(2, 300), 0, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Read(*kept), std::vector<float>({100, 101, 102, 103, 104, 105}));
  ASSERT_TRUE(stager->Ready(c->slot).ok());
  EXPECT_EQ(Read(c->tensors[0]), std::vector<float>({300, 301, 302, 303, 304, 305}));
}

// Stage blocks while every slot is staged or held, and goes on when one is released.
TEST_F(InputStagerTest, SlotsBoundWhatIsStagedOrHeld) {
  auto stager = MakeStager(2);
  auto a = stager->Stage(Batch(2, 0), 0, 2);
  auto b = stager->Stage(Batch(2, 0), 0, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(stager->busy_slots(), 2);
  auto third =
      std::async(std::launch::async, [&] { return stager->Stage(Batch(2, 7), 0, 2).status(); });
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "a third batch was staged into two held slots";
  a->tensors.clear();  // the last tensor of A goes: its slot is free
  ASSERT_EQ(third.wait_for(kDeadline), std::future_status::ready);
  EXPECT_TRUE(third.get().ok());
  EXPECT_EQ(stager->busy_slots(), 1) << "the third batch's tensors were dropped at once";
}

TEST_F(InputStagerTest, CancelEndsAStageWaitingForASlot) {
  auto stager = MakeStager(1);
  auto held = stager->Stage(Batch(2, 0), 0, 2);
  ASSERT_TRUE(held.ok());
  auto waiting =
      std::async(std::launch::async, [&] { return stager->Stage(Batch(2, 0), 0, 2).status(); });
  stager->Cancel();
  ASSERT_EQ(waiting.wait_for(kDeadline), std::future_status::ready);
  absl::Status s = waiting.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(stager->Stage(Batch(2, 0), 0, 2).status().code(), absl::StatusCode::kCancelled);
}

TEST_F(InputStagerTest, BadInputAndDeviceErrorsAreAnsweredAndFreeTheSlot) {
  auto stager = MakeStager(1);
  absl::Status rows = stager->Stage(Batch(2, 0), 1, 3).status();
  EXPECT_EQ(rows.code(), absl::StatusCode::kInvalidArgument) << rows;
  EXPECT_THAT(rows.message(), HasSubstr("rows [1, 3)"));
  absl::StatusOr<Tensor> device = ZerosOnDevice(*context_, DType::kF32, Shape{2, 3});
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(stager->Stage({*device}, 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  fake_->FailAllocation(1);
  absl::Status oom = stager->Stage(Batch(2, 0), 0, 2).status();
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted) << oom;
  EXPECT_THAT(oom.message(), HasSubstr("InputStager on GPU 0"));
  EXPECT_EQ(stager->busy_slots(), 0);
  auto ok = stager->Stage(Batch(2, 5), 0, 2);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_TRUE(stager->Ready(ok->slot).ok());
  EXPECT_EQ(Read(ok->tensors[0]), std::vector<float>({5, 6, 7, 8, 9, 10}));
}

// Tensors may outlive the stager: its slots' memory goes with the last of them.
TEST_F(InputStagerTest, StagedTensorsOutliveTheStager) {
  auto stager = MakeStager(1);
  auto staged = stager->Stage(Batch(1, 4), 0, 1);
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(stager->Ready(staged->slot).ok());
  stager.reset();
  EXPECT_EQ(Read(staged->tensors[0]), std::vector<float>({4, 5, 6}));
}

}  // namespace
}  // namespace lockstep::engine::gpu
