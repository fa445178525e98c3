// What the peer all-reduce benchmarks (Gloo, Open MPI) measure per message size, and the
// rules they share so that their figures compare with `lockstep bench allreduce`:
//
//   * data: rank r holds (r + 1) * (1 + i % 7) at element i, so the float32 SUM is exact
//     (np * (np + 1) / 2 * (1 + i % 7)) and every element is checked after the first call;
//   * warm-up: a few untimed calls (fewer for large sizes, see WarmupIters);
//   * timing: one barrier, then K back-to-back calls, each timed on rank 0 (no barrier in
//     between, as nccl-tests); K from ChooseTimedIters so that a size takes ~target_s;
//   * output: one JSON object per size per line on stdout (ToJsonLine).
//
// Plain value types and free functions; no state, safe from any thread.
#ifndef LOCKSTEP_COLLECTIVES_BENCH_PEER_MEASUREMENT_H_
#define LOCKSTEP_COLLECTIVES_BENCH_PEER_MEASUREMENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::bench {

// One line of the report.
struct PeerMeasurement {
  std::string impl;  // "gloo_ring_chunked", "gloo_halving_doubling", "mpi_vader", "mpi_tcp".
  int np = 0;
  uint64_t bytes = 0;
  int iters = 0;           // Timed iterations.
  double time_us_p50 = 0;  // Median of the per-iteration times on rank 0.
  double time_us_avg = 0;  // Total time of the K back-to-back calls / K.
  double algbw_gbps = 0;   // bytes / time_us_p50, in 1e9 bytes/s.
  double busbw_gbps = 0;   // algbw * 2 (np - 1) / np.
  bool correct = false;    // Every element on every rank matched after the first call.
};

// Writes rank `rank`'s input pattern into data[0, count).
void FillPattern(int rank, float* data, uint64_t count);

// Returns how many elements of data[0, count) differ from the SUM over `np` ranks.
uint64_t CountSumErrors(int np, const float* data, uint64_t count);

// Untimed warm-up calls for a message of `bytes`: `requested`, cut so that the warm-up
// moves at most ~128 MiB, at least 1. Deterministic, so every rank agrees without talking.
int WarmupIters(uint64_t bytes, int requested);

// Timed iterations for a call estimated at `estimate_us`: enough to fill `target_s`,
// at least `min_iters`, at most `max_iters` (which wins over min_iters).
int ChooseTimedIters(double estimate_us, double target_s, int min_iters, int max_iters);

// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
// Every benchmark here reports medians through this one function.
double Median(std::vector<double> v);

// Fills in the statistics from rank 0's per-iteration times (microseconds).
PeerMeasurement Summarize(std::string impl, int np, uint64_t bytes,
                          const std::vector<double>& iter_us, bool correct);

// {"impl":"mpi_vader","np":2,"bytes":8,"time_us_p50":1.5,...} without a newline.
std::string ToJsonLine(const PeerMeasurement& m);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_COLLECTIVES_BENCH_PEER_MEASUREMENT_H_
