#include "collectives/bench/core_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {
namespace bench {
namespace {

constexpr int kBatch = 256;

struct alignas(64) Line {
  std::atomic<uint64_t> value{0};
};

struct Shared {
  Line ping, pong;
  std::atomic<bool> stop{false};  // either side gave up (deadline, affinity)
  std::chrono::steady_clock::time_point deadline;
};

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

inline void Relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Spins until `line` holds `want`; false when the probe is stopped or past its deadline.
bool WaitFor(Shared& s, const Line& line, uint64_t want) {
  for (uint32_t spins = 1;; ++spins) {
    if (line.value.load(std::memory_order_acquire) == want) return true;
    Relax();
    if (spins % 4096 == 0) {
      if (s.stop.load(std::memory_order_relaxed)) return false;
      if (std::chrono::steady_clock::now() > s.deadline) {
        s.stop.store(true);
        return false;
      }
    }
  }
}

}  // namespace

absl::StatusOr<CoreLatency> MeasureCoreLatency(const CoreLatencyOptions& options) {
  if (options.round_trips < kBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("round_trips must be at least ", kBatch, ", got ", options.round_trips));
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return absl::InternalError("sched_getaffinity failed");
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the core-to-core probe needs two CPUs; this process may run on ", cpus.size()));
  }
  CoreLatency result;
  result.cpu_a = options.cpu_a >= 0 ? options.cpu_a : cpus[0];
  result.cpu_b = options.cpu_b >= 0 ? options.cpu_b : cpus[1];
  for (auto [name, cpu] : {std::pair<const char*, int>{"cpu_a", result.cpu_a},
                           std::pair<const char*, int>{"cpu_b", result.cpu_b}}) {
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": this process may not run on CPU ", cpu));
    }
  }
  if (result.cpu_a == result.cpu_b) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_a and cpu_b are both CPU ", result.cpu_a, "; give two CPUs"));
  }

  Shared s;
  s.deadline = std::chrono::steady_clock::now() +
               std::chrono::nanoseconds(absl::ToInt64Nanoseconds(options.timeout));
  const int batches = options.round_trips / kBatch;
  std::vector<double> batch_ns;
  batch_ns.reserve(batches);
  bool pinned_a = true, pinned_b = true;
  std::thread responder([&] {
    pinned_b = Pin(result.cpu_b);
    if (!pinned_b) s.stop.store(true);
    for (uint64_t i = 1; i <= static_cast<uint64_t>(batches) * kBatch; ++i) {
      if (!WaitFor(s, s.ping, i)) return;
      s.pong.value.store(i, std::memory_order_release);
    }
  });
  std::thread initiator([&] {
    pinned_a = Pin(result.cpu_a);
    if (!pinned_a) s.stop.store(true);
    uint64_t i = 0;
    for (int b = 0; b < batches && !s.stop.load(); ++b) {
      const auto start = std::chrono::steady_clock::now();
      bool ok = true;
      for (int k = 0; k < kBatch && ok; ++k) {
        ++i;
        s.ping.value.store(i, std::memory_order_release);
        ok = WaitFor(s, s.pong, i);
      }
      if (!ok) break;
      batch_ns.push_back(
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
              .count() /
          kBatch);
    }
    s.stop.store(true);
  });
  initiator.join();
  responder.join();
  if (!pinned_a || !pinned_b) {
    return absl::InternalError(absl::StrCat("could not pin the probe's threads to CPUs ",
                                            result.cpu_a, " and ", result.cpu_b));
  }
  if (static_cast<int>(batch_ns.size()) < batches) {
    return absl::DeadlineExceededError(
        absl::StrCat("core-to-core probe: CPUs ", result.cpu_a, " and ", result.cpu_b, " finished ",
                     batch_ns.size(), " of ", batches, " batches within ",
                     absl::FormatDuration(options.timeout), "; is one of them starved?"));
  }
  std::nth_element(batch_ns.begin(), batch_ns.begin() + batch_ns.size() / 2, batch_ns.end());
  result.round_trip_ns = batch_ns[batch_ns.size() / 2];
  return result;
}

bool MeasuredScheduling(const CoreLatency& probe) {
  return probe.round_trip_ns >= kProbeSchedulingNs;
}

std::string CoreLatencyLine(const absl::StatusOr<CoreLatency>& l) {
  if (!l.ok()) return absl::StrCat("core-to-core probe failed: ", l.status().message());
  return absl::StrFormat(
      "core-to-core round trip %.0f ns (CPUs %d and %d)%s", l->round_trip_ns, l->cpu_a, l->cpu_b,
      MeasuredScheduling(*l) ? absl::StrFormat("; at or above %.0f us: it measured the "
                                               "scheduler (a busy machine), not the cache",
                                               kProbeSchedulingNs / 1e3)
                             : "");
}

Placement ClassifyPlacement(const absl::StatusOr<CoreLatency>& before,
                            const absl::StatusOr<CoreLatency>& after) {
  if (!before.ok() || !after.ok()) return Placement::kUnknown;
  if (MeasuredScheduling(*before) || MeasuredScheduling(*after)) return Placement::kUnknown;
  const bool a = before->round_trip_ns >= kSplitPlacementNs;
  const bool b = after->round_trip_ns >= kSplitPlacementNs;
  if (a != b) return Placement::kMixed;
  return a ? Placement::kSplit : Placement::kSharedL3;
}

const char* PlacementName(Placement p) {
  switch (p) {
    case Placement::kSharedL3:
      return "CPUs sharing an L3 (probe < 200 ns)";
    case Placement::kSplit:
      return "CPUs on different L3s (probe >= 200 ns)";
    case Placement::kMixed:
      return "placement changed during the run";
    case Placement::kUnknown:
      return "placement unknown (no probe, or a probe that measured scheduling)";
  }
  return "";
}

}  // namespace bench
}  // namespace lockstep
