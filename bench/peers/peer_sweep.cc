#include "bench/peers/peer_sweep.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/peers/size_range.h"
#include "collectives/bench/peer_measurement.h"
#include "common/status.h"

namespace lockstep::bench {

namespace {

using SteadyClock = std::chrono::steady_clock;

double MicrosSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::micro>(SteadyClock::now() - start).count();
}

// Runs one size; returns its measurement (meaningful on rank 0 only).
absl::StatusOr<PeerMeasurement> MeasureSize(PeerCollective& collective,
                                            const PeerSweepOptions& options, uint64_t bytes,
                                            std::vector<float>& buffer) {
  const int rank = collective.rank();
  const int np = collective.size();
  const uint64_t count = bytes / sizeof(float);
  float* data = buffer.data();
  FillPattern(rank, data, count);
  LS_RETURN_IF_ERROR(collective.Prepare(data, count));

  // Correctness: the first call, every element on every rank.
  LS_RETURN_IF_ERROR(collective.AllReduce());
  const uint64_t errors = CountSumErrors(np, data, count);
  if (errors > 0) {
    std::fprintf(stderr, "%s rank %d: %llu of %llu elements wrong after all-reduce of %llu bytes\n",
                 options.impl.c_str(), rank, static_cast<unsigned long long>(errors),
                 static_cast<unsigned long long>(count), static_cast<unsigned long long>(bytes));
  }
  LS_ASSIGN_OR_RETURN(const int wrong_ranks, collective.SumOverRanks(errors > 0 ? 1 : 0));
  // Zeros from here on: repeated in-place sums would otherwise grow to infinity.
  std::fill(data, data + count, 0.0f);

  // Warm-up, timed on rank 0 to size the timed loop.
  const int warmup = WarmupIters(bytes, options.warmup_iters);
  const SteadyClock::time_point warmup_start = SteadyClock::now();
  for (int i = 0; i < warmup; ++i) LS_RETURN_IF_ERROR(collective.AllReduce());
  const double estimate_us = MicrosSince(warmup_start) / warmup;
  LS_ASSIGN_OR_RETURN(const int iters,
                      collective.BroadcastFromRank0(ChooseTimedIters(
                          estimate_us, options.target_s, options.min_iters, options.max_iters)));

  // Timed: one barrier, then back-to-back calls, each timed.
  std::vector<double> iter_us(iters);
  LS_RETURN_IF_ERROR(collective.Barrier());
  for (int i = 0; i < iters; ++i) {
    const SteadyClock::time_point start = SteadyClock::now();
    LS_RETURN_IF_ERROR(collective.AllReduce());
    iter_us[i] = MicrosSince(start);
  }
  return Summarize(options.impl, np, bytes, iter_us, wrong_ranks == 0);
}

}  // namespace

absl::StatusOr<PeerSweepOptions> MakePeerSweepOptions(std::string impl,
                                                      const std::string& sizes_text, int max_iters,
                                                      int min_iters, int warmup_iters,
                                                      double target_s) {
  PeerSweepOptions options;
  options.impl = std::move(impl);
  LS_ASSIGN_OR_RETURN(options.sizes, ParseSizeRange(sizes_text));
  if (max_iters < 1 || min_iters < 1 || warmup_iters < 1) {
    return absl::InvalidArgumentError("--iters, --min_iters and --warmup must be at least 1");
  }
  if (!(target_s > 0)) return absl::InvalidArgumentError("--target_s must be positive");
  options.max_iters = max_iters;
  options.min_iters = min_iters;
  options.warmup_iters = warmup_iters;
  options.target_s = target_s;
  return options;
}

absl::StatusOr<int> RunPeerSweep(PeerCollective& collective, const PeerSweepOptions& options,
                                 std::FILE* out) {
  if (options.sizes.empty()) return absl::InvalidArgumentError("no message sizes to measure");
  const uint64_t max_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  std::vector<float> buffer(max_bytes / sizeof(float));
  int wrong_sizes = 0;
  for (const uint64_t bytes : options.sizes) {
    absl::StatusOr<PeerMeasurement> m = MeasureSize(collective, options, bytes, buffer);
    if (!m.ok()) {
      return Annotate(m.status(), absl::StrCat(options.impl, " rank ", collective.rank(), " of ",
                                               collective.size(), ", ", bytes, " bytes"));
    }
    wrong_sizes += !m->correct;
    if (collective.rank() == 0) {
      std::fprintf(out, "%s\n", ToJsonLine(*m).c_str());
      std::fflush(out);
    }
  }
  // No rank leaves (closing its connections) before every rank is done with the last
  // exchange: otherwise a rank still finishing it can see "connection closed by peer".
  absl::Status done = collective.Barrier();
  if (done.ok()) done = collective.Leave();
  if (!done.ok()) {
    return Annotate(done, absl::StrCat(options.impl, " rank ", collective.rank(), " of ",
                                       collective.size(), ", closing barrier"));
  }
  return wrong_sizes;
}

}  // namespace lockstep::bench
