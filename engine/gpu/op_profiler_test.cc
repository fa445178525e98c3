// OpProfiler on FakeCudaApi, whose timing events count the work between two marks: segments
// get their own work, nested marks resume without a call, and Harvest never waits.
#include "engine/gpu/op_profiler.h"

#include "common/cuda/fake_cuda_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {
namespace {

using ::testing::HasSubstr;

absl::Status Launches(FakeCudaApi& api, CudaStream s, int n) {
  for (int i = 0; i < n; ++i) {
    if (absl::Status st = api.Launch(s, "k", [] { return absl::OkStatus(); }); !st.ok()) return st;
  }
  return absl::OkStatus();
}

TEST(OpProfilerTest, SegmentsGetTheWorkBetweenTheirMarks) {
  std::unique_ptr<FakeCudaApi> api = *FakeCudaApi::Create();
  CudaStream s = *api->StreamCreate();
  std::unique_ptr<OpProfiler> p = *OpProfiler::Create(api.get(), s);
  for (int step = 0; step < 2; ++step) {
    p->BeginStep();
    ASSERT_TRUE(p->Mark("dense", "MATMUL", OpProfiler::Phase::kForward).ok());
    ASSERT_TRUE(Launches(*api, s, 2).ok());
    ASSERT_TRUE(p->Mark("dense", "MATMUL", OpProfiler::Phase::kBackward).ok());
    ASSERT_TRUE(Launches(*api, s, 1).ok());
    ASSERT_TRUE(p->Mark("hand-off", "-", OpProfiler::Phase::kOther).ok());
    ASSERT_TRUE(Launches(*api, s, 4).ok());
    // Back to the node's backward pass: no second call.
    ASSERT_TRUE(p->Resume().ok());
    ASSERT_TRUE(Launches(*api, s, 1).ok());
    ASSERT_TRUE(p->Mark("outside", "-", OpProfiler::Phase::kOther).ok());
    // Nothing has run yet: Harvest reads nothing and does not wait.
    const int64_t waits = api->counters().host_waits;
    ASSERT_TRUE(p->Harvest().ok());
    EXPECT_EQ(api->counters().host_waits, waits);
  }
  absl::StatusOr<OpProfiler::Profile> profile = p->Finish();
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->steps, 2);
  ASSERT_EQ(profile->rows.size(), 3u);
  const OpProfiler::Row& dense = profile->rows[0];
  EXPECT_EQ(dense.name, "dense");
  EXPECT_EQ(dense.ms[0], 4);  // 2 per step
  EXPECT_EQ(dense.ms[1], 4);  // 1 + 1 per step
  EXPECT_EQ(dense.calls[0], 2);
  EXPECT_EQ(dense.calls[1], 2);
  EXPECT_EQ(profile->rows[1].ms[2], 8);
  // The second step's "outside" segment is still open, the first one's is empty.
  EXPECT_EQ(profile->rows[2].ms[2], 0);
  EXPECT_EQ(profile->total_ms(), 16);
  const std::string table = OpProfiler::Table(*profile, "launches");
  EXPECT_THAT(table, HasSubstr("| dense | MATMUL | 2.000 | 2.000 | 0.000 | 2.00 | 50.0% |"));
  EXPECT_THAT(table, HasSubstr("| hand-off | - | 0.000 | 0.000 | 4.000 | 1.00 | 50.0% |"));
  EXPECT_THAT(table, HasSubstr("8.000 launches"));
}

TEST(OpProfilerTest, ResetForgetsTheWarmupAndEventsAreReused) {
  std::unique_ptr<FakeCudaApi> api = *FakeCudaApi::Create();
  CudaStream s = *api->StreamCreate();
  std::unique_ptr<OpProfiler> p = *OpProfiler::Create(api.get(), s);
  for (int step = 0; step < 3; ++step) {
    p->BeginStep();
    ASSERT_TRUE(p->Mark("a", "RELU", OpProfiler::Phase::kForward).ok());
    ASSERT_TRUE(Launches(*api, s, 3).ok());
    ASSERT_TRUE(p->Mark("b", "-", OpProfiler::Phase::kOther).ok());
    ASSERT_TRUE(api->StreamSynchronize(s).ok());
    ASSERT_TRUE(p->Harvest().ok());
    if (step == 0) ASSERT_TRUE(p->Reset().ok());
  }
  absl::StatusOr<OpProfiler::Profile> profile = p->Finish();
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->steps, 2);
  EXPECT_EQ(profile->rows[0].ms[0], 6);
  EXPECT_EQ(profile->rows[0].calls[0], 2);
  // Two marks in flight at most: harvested events are recorded again.
  EXPECT_LE(api->counters().timing_events_created, 3);
}

TEST(OpProfilerTest, AFailedRecordIsReported) {
  std::unique_ptr<FakeCudaApi> api = *FakeCudaApi::Create();
  CudaStream s = *api->StreamCreate();
  std::unique_ptr<OpProfiler> p = *OpProfiler::Create(api.get(), s);
  EXPECT_EQ(p->Resume().code(), absl::StatusCode::kFailedPrecondition);
  api->InjectStickyError("an illegal memory access");
  absl::Status st = p->Mark("a", "RELU", OpProfiler::Phase::kForward);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_THAT(st.message(), HasSubstr("OpProfiler::Mark"));
  EXPECT_EQ(OpProfiler::Create(nullptr, s).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::engine::gpu
