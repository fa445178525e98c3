#include "worker/test_hooks.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

TEST(TestHooksTest, ParsesEachHook) {
  absl::StatusOr<TestHooks> h = ParseTestHooks("stall=input@20, slow_compute_ms=15");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->StallsAt(v1::PHASE_INPUT, 20));
  EXPECT_FALSE(h->StallsAt(v1::PHASE_COMPUTE, 20));
  EXPECT_FALSE(h->StallsAt(v1::PHASE_INPUT, 19));
  EXPECT_EQ(h->slow_compute, absl::Milliseconds(15));
  h = ParseTestHooks("stall=compute@3");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->StallsAt(v1::PHASE_COMPUTE, 3));
  h = ParseTestHooks("");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->empty());
}

TEST(TestHooksTest, RefusesWhatItCannotRead) {
  for (const char* bad : {"stall", "stall=apply@3", "stall=input@0", "stall=input@x",
                          "slow_compute_ms=-1", "slow_compute_ms=a", "sleep=3"}) {
    absl::StatusOr<TestHooks> h = ParseTestHooks(bad);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(h.status().message().find("LOCKSTEP_TEST_HOOKS"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
