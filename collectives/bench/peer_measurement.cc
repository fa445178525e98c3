#include "collectives/bench/peer_measurement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"

namespace lockstep::bench {

namespace {
float PatternFactor(uint64_t i) { return static_cast<float>(1 + i % 7); }
}  // namespace

void FillPattern(int rank, float* data, uint64_t count) {
  const float scale = static_cast<float>(rank + 1);
  for (uint64_t i = 0; i < count; ++i) data[i] = scale * PatternFactor(i);
}

uint64_t CountSumErrors(int np, const float* data, uint64_t count) {
  const float scale = static_cast<float>(np) * static_cast<float>(np + 1) / 2.0f;
  uint64_t errors = 0;
  for (uint64_t i = 0; i < count; ++i) errors += data[i] != scale * PatternFactor(i);
  return errors;
}

int WarmupIters(uint64_t bytes, int requested) {
  constexpr uint64_t kWarmupBudgetBytes = uint64_t{128} << 20;
  const uint64_t cap = std::max<uint64_t>(1, kWarmupBudgetBytes / std::max<uint64_t>(bytes, 1));
  return static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(requested, cap)));
}

int ChooseTimedIters(double estimate_us, double target_s, int min_iters, int max_iters) {
  double wanted = estimate_us > 0 ? target_s * 1e6 / estimate_us : max_iters;
  wanted = std::clamp(wanted, 1.0, 1e9);
  int iters = std::max(min_iters, static_cast<int>(std::ceil(wanted)));
  return std::max(1, std::min(iters, max_iters));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

PeerMeasurement Summarize(std::string impl, int np, uint64_t bytes,
                          const std::vector<double>& iter_us, bool correct) {
  PeerMeasurement m;
  m.impl = std::move(impl);
  m.np = np;
  m.bytes = bytes;
  m.iters = static_cast<int>(iter_us.size());
  m.correct = correct;
  if (iter_us.empty()) return m;
  m.time_us_p50 = Median(iter_us);
  m.time_us_avg = std::accumulate(iter_us.begin(), iter_us.end(), 0.0) / iter_us.size();
  if (m.time_us_p50 > 0) {
    m.algbw_gbps = static_cast<double>(bytes) / (m.time_us_p50 * 1e3);  // B/us -> GB/s.
    m.busbw_gbps = m.algbw_gbps * 2.0 * (np - 1) / np;
  }
  return m;
}

std::string ToJsonLine(const PeerMeasurement& m) {
  return absl::StrFormat(
      "{\"impl\":\"%s\",\"np\":%d,\"bytes\":%d,\"time_us_p50\":%.3f,\"algbw_gbps\":%.6f,"
      "\"busbw_gbps\":%.6f,\"correct\":%s,\"iters\":%d,\"time_us_avg\":%.3f}",
      m.impl, m.np, m.bytes, m.time_us_p50, m.algbw_gbps, m.busbw_gbps,
      m.correct ? "true" : "false", m.iters, m.time_us_avg);
}

}  // namespace lockstep::bench
