// The core-to-core probe: a measurement on two CPUs, and its errors for bad options.
#include "collectives/bench/core_latency.h"

#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace bench {
namespace {

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

TEST(CoreLatencyTest, MeasuresARoundTripBetweenTwoCpus) {
  if (AllowedCpus() < 2) GTEST_SKIP() << "needs two CPUs";
  CoreLatencyOptions o;
  o.round_trips = 4096;
  absl::StatusOr<CoreLatency> l = MeasureCoreLatency(o);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NE(l->cpu_a, l->cpu_b);
  // A round trip is two crossings of a cache line: it cannot take zero time. How fast it is
  // depends on how busy the machine is; the benchmarks judge that (kProbeSchedulingNs).
  EXPECT_GT(l->round_trip_ns, 1.0);
  EXPECT_TRUE(std::isfinite(l->round_trip_ns));
  EXPECT_NE(CoreLatencyLine(l).find("core-to-core round trip"), std::string::npos);
}

TEST(CoreLatencyTest, RefusesBadOptionsNamingTheField) {
  CoreLatencyOptions o;
  o.round_trips = 10;
  absl::StatusOr<CoreLatency> l = MeasureCoreLatency(o);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("round_trips"), std::string::npos);

  if (AllowedCpus() < 2) GTEST_SKIP() << "needs two CPUs";
  o = {};
  o.cpu_b = CPU_SETSIZE - 1;  // not a CPU this process may run on
  l = MeasureCoreLatency(o);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("cpu_b"), std::string::npos);
  EXPECT_NE(CoreLatencyLine(l).find("probe failed"), std::string::npos);

  o = {};
  o.cpu_a = 0;
  o.cpu_b = 0;
  l = MeasureCoreLatency(o);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoreLatencyTest, ClassifiesPlacementFromTheProbesAroundARun) {
  auto at = [](double ns) -> absl::StatusOr<CoreLatency> {
    CoreLatency l;
    l.round_trip_ns = ns;
    return l;
  };
  const absl::StatusOr<CoreLatency> failed = absl::DeadlineExceededError("starved");
  EXPECT_EQ(ClassifyPlacement(at(60), at(95)), Placement::kSharedL3);
  EXPECT_EQ(ClassifyPlacement(at(390), at(450)), Placement::kSplit);
  EXPECT_EQ(ClassifyPlacement(at(80), at(400)), Placement::kMixed);
  EXPECT_EQ(ClassifyPlacement(at(400), at(80)), Placement::kMixed);
  EXPECT_EQ(ClassifyPlacement(at(199.9), at(kSplitPlacementNs)), Placement::kMixed);
  EXPECT_EQ(ClassifyPlacement(failed, at(80)), Placement::kUnknown);
  EXPECT_EQ(ClassifyPlacement(at(80), failed), Placement::kUnknown);
  // A probe that measured the scheduler places nothing, and its line says so.
  EXPECT_EQ(ClassifyPlacement(at(80), at(kProbeSchedulingNs)), Placement::kUnknown);
  EXPECT_EQ(ClassifyPlacement(at(250e3), at(400)), Placement::kUnknown);
  EXPECT_NE(CoreLatencyLine(at(250e3)).find("measured the scheduler"), std::string::npos);
  EXPECT_EQ(CoreLatencyLine(at(99e3)).find("measured the scheduler"), std::string::npos);
  EXPECT_NE(std::string(PlacementName(Placement::kSplit)).find("different L3s"), std::string::npos);
}

}  // namespace
}  // namespace bench
}  // namespace lockstep
