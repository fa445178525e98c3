// Core-to-core latency: how fast two CPUs of this machine hand a cache line to each other.
//
// On a virtual machine the host decides which physical cores our vCPUs run on, and moves
// them. On these 2-vCPU AMD EPYC machines the two vCPUs sometimes share an L3 (one CCX) and
// sometimes not; a cache line then crosses the Infinity Fabric, and everything that moves
// data between the CPUs slows down together: measured here, a shared-memory all-reduce of
// 256 KiB took 13-23 us in one placement and 113-142 us in the other, Open MPI's vader
// 37-67 us and 158-199 us, within the same minute. The benchmarks print this probe beside
// their figures so that rows measured in different placements are not compared as if they
// were alike.
//
// The probe: two threads, pinned to `cpu_a` and `cpu_b`, pass a counter back and forth
// through one cache line `round_trips` times; the result is the median over batches of 256
// round trips, in nanoseconds per round trip.
// Thread model: starts and joins its own two threads; call it from any thread, but not
// concurrently with work that should not share those CPUs.
#ifndef LOCKSTEP_COLLECTIVES_BENCH_CORE_LATENCY_H_
#define LOCKSTEP_COLLECTIVES_BENCH_CORE_LATENCY_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace bench {

struct CoreLatencyOptions {
  int cpu_a = -1;  // -1: the first CPU this process may run on
  int cpu_b = -1;  // -1: the second one
  int round_trips = 20000;
  // Bounds the whole probe; a CPU that never runs our thread (a cgroup quota, a stopped
  // host) gives DEADLINE_EXCEEDED instead of a hang.
  absl::Duration timeout = absl::Seconds(5);
};

struct CoreLatency {
  int cpu_a = 0, cpu_b = 0;
  double round_trip_ns = 0;  // median per batch
};

// INVALID_ARGUMENT naming the field for a CPU this process may not run on (or the same CPU
// twice) or round_trips < 256; FAILED_PRECONDITION when the process may run on fewer than
// two CPUs; DEADLINE_EXCEEDED past `timeout`.
absl::StatusOr<CoreLatency> MeasureCoreLatency(const CoreLatencyOptions& options = {});

// A cache line crosses between cores in tens to hundreds of nanoseconds, even across sockets;
// a round trip slower than this measured the scheduler (a probe thread preempted on a busy
// machine), not the cache. The benchmarks flag such a probe and place no run by it; the tests
// only check that the probe measures something.
constexpr double kProbeSchedulingNs = 100e3;
bool MeasuredScheduling(const CoreLatency& probe);

// One line for a benchmark's output: "core-to-core round trip 212 ns (CPUs 0 and 1)", or
// the probe's error; a probe at or above kProbeSchedulingNs says so.
std::string CoreLatencyLine(const absl::StatusOr<CoreLatency>& probe);

// Where the host ran a measurement, from the probe before and after it.
enum class Placement {
  kSharedL3,  // both probes below kSplitPlacementNs
  kSplit,     // both at or above it: the CPUs are on different L3s
  kMixed,     // the placement changed during the measurement
  kUnknown,   // a probe failed, or measured scheduling (kProbeSchedulingNs)
};
// Measured on these machines: 35-97 ns per round trip with the vCPUs on one L3, 370-470 ns
// apart, nothing in between.
constexpr double kSplitPlacementNs = 200;
Placement ClassifyPlacement(const absl::StatusOr<CoreLatency>& before,
                            const absl::StatusOr<CoreLatency>& after);
// "CPUs sharing an L3 (probe < 200 ns)", ...
const char* PlacementName(Placement p);

}  // namespace bench
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_BENCH_CORE_LATENCY_H_
