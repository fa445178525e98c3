#include "collectives/bench/allreduce_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "collectives/bench/peer_measurement.h"
#include "collectives/communicator_factory.h"
#include "collectives/file_store.h"
#include "collectives/fused_all_reduce.h"
#include "common/status.h"

namespace lockstep {
namespace bench {
namespace {

using collectives::Communicator;
using collectives::ReduceOp;

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Time Deadline() { return absl::Now() + absl::Seconds(120); }

constexpr int kFusionTensors = 100;
constexpr size_t kFusionFloats = 40 * 1024 / sizeof(float);

// The rank's buffers: from the transport's zero-copy heap when it has one (what a trainer
// does for its gradients), else ordinary memory. Freed when it goes.
class Buffers {
 public:
  explicit Buffers(std::shared_ptr<collectives::TransportHeap> heap) : heap_(std::move(heap)) {}
  absl::StatusOr<float*> Allocate(size_t floats) {
    if (heap_ == nullptr) return ordinary_.emplace_back(floats).data();
    std::shared_ptr<char> p = collectives::AllocateShared(heap_, floats * sizeof(float));
    if (p == nullptr) {
      return absl::InternalError(absl::StrCat("the shm heap has no room for ", floats,
                                              " floats; the bench sized it too small"));
    }
    return reinterpret_cast<float*>(from_heap_.emplace_back(std::move(p)).get());
  }

 private:
  std::shared_ptr<collectives::TransportHeap> heap_;
  std::vector<std::shared_ptr<char>> from_heap_;
  std::deque<std::vector<float>> ordinary_;
};

void Fill(int rank, float* x, size_t count) {
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((rank + 1) * (1 + i % 7));
}

bool Check(int np, const float* x, size_t count) {
  const float ranks = static_cast<float>(np * (np + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    if (x[i] != ranks * static_cast<float>(1 + i % 7)) return false;
  }
  return true;
}

// Returns the JSON line for one size.
absl::StatusOr<std::string> MeasureSize(Communicator& comm, const RankConfig& c, uint64_t bytes,
                                        float* x) {
  const size_t count = bytes / sizeof(float);
  Fill(c.rank, x, count);
  LS_RETURN_IF_ERROR(comm.AllReduce(x, x, count, DType::kF32, ReduceOp::kSum, Deadline()));
  int32_t ok = Check(c.np, x, count) ? 1 : 0;  // agreed on with the last call's check

  const int warmup = WarmupIters(bytes, c.warmup);
  double start = NowUs();
  for (int i = 0; i < warmup; ++i) {
    LS_RETURN_IF_ERROR(comm.AllReduce(x, x, count, DType::kF32, ReduceOp::kSum, Deadline()));
  }
  int64_t iters = ChooseTimedIters((NowUs() - start) / warmup, c.target_s, 5, c.max_iters);
  LS_RETURN_IF_ERROR(comm.Broadcast(&iters, 1, DType::kI64, 0, Deadline()));

  std::vector<double> times(iters);
  LS_RETURN_IF_ERROR(comm.Barrier(Deadline()));
  const double all_start = NowUs();
  double refill_us = 0;
  for (int64_t i = 0; i < iters; ++i) {
    // The last timed call is checked too: repeated sums in place grow without bound, so its
    // input is refilled first (outside its time, and taken out of the average).
    if (i + 1 == iters) {
      const double r0 = NowUs();
      Fill(c.rank, x, count);
      refill_us = NowUs() - r0;
    }
    double t0 = NowUs();
    LS_RETURN_IF_ERROR(comm.AllReduce(x, x, count, DType::kF32, ReduceOp::kSum, Deadline()));
    times[i] = NowUs() - t0;
  }
  const double avg = (NowUs() - all_start - refill_us) / iters;
  ok &= Check(c.np, x, count) ? 1 : 0;
  LS_RETURN_IF_ERROR(comm.AllReduce(&ok, &ok, 1, DType::kI32, ReduceOp::kMin, Deadline()));
  return absl::StrFormat(
      R"({"bytes":%d,"iters":%d,"time_us_p50":%.3f,"time_us_avg":%.3f,"correct":%s})", bytes, iters,
      Median(times), avg, ok ? "true" : "false");
}

// 100 tensors of 40 KiB: 100 separate synchronous calls; 100 separate async calls issued
// back to back and then waited for (what a training step that overlaps the backward pass
// issues without fusion); then the same through FusedAllReduce, and through FusedAllReduce
// with bf16 compression (communication.compression BF16: rounded in place, all-reduced as
// bf16, widened back; the data are small integers, exact in bf16, so it is checked too).
//
// Each way is timed on the second of two back-to-back runs of its own, as a training loop runs
// one of them step after step. The traffic of one way leaves the host slower for the next
// way's bulk transfers, a cost no trainer pays: after 100 separate calls of 40 KiB, a fused
// 4000 KiB bucket over TCP took 695-811 us, against 588-676 after another fused call. It is
// not the connections' TCP state: bench/tcp_loopback_probe puts a 2000 KiB exchange at 250 us
// after one exchange of 40 KiB, 288 us after 100, and 369 us after 100 sent over connections
// of their own (--small_lane; medians of 10 rounds on CPUs sharing an L3).
absl::StatusOr<std::string> MeasureFusion(Communicator& comm, const RankConfig& c,
                                          Buffers& buffers) {
  constexpr int kReps = 20, kWarmup = 3;
  std::vector<absl::Span<float>> t;
  for (int i = 0; i < kFusionTensors; ++i) {
    LS_ASSIGN_OR_RETURN(float* p, buffers.Allocate(kFusionFloats));
    t.push_back(absl::MakeSpan(p, kFusionFloats));
  }
  for (auto& v : t) Fill(c.rank, v.data(), v.size());
  collectives::FusedAllReduce fused(&comm, ReduceOp::kSum, c.bytes_per_pack);
  collectives::FusedAllReduce fused_bf16(&comm, ReduceOp::kSum, c.bytes_per_pack,
                                         collectives::Compression::kBF16);
  std::vector<collectives::Handle> handles;
  auto run_separate = [&]() -> absl::Status {
    for (auto& v : t) {
      LS_RETURN_IF_ERROR(
          comm.AllReduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum, Deadline()));
    }
    return absl::OkStatus();
  };
  auto run_fused = [&]() -> absl::Status {
    for (auto& v : t) fused.Add(v.data(), v.size(), DType::kF32, Deadline());
    return fused.Finish();
  };
  auto run_fused_bf16 = [&]() -> absl::Status {
    for (auto& v : t) fused_bf16.Add(v.data(), v.size(), DType::kF32, Deadline());
    return fused_bf16.Finish();
  };
  auto run_separate_async = [&]() -> absl::Status {
    handles.clear();
    for (auto& v : t) {
      handles.push_back(comm.AllReduceAsync(v.data(), v.data(), v.size(), DType::kF32,
                                            ReduceOp::kSum, Deadline()));
    }
    for (auto& h : handles) LS_RETURN_IF_ERROR(h->Wait());
    return absl::OkStatus();
  };
  // Runs `way` untimed, then again from a barrier, timed; `before_timed` runs in between.
  auto second_run_us = [&](auto& way, auto before_timed) -> absl::StatusOr<double> {
    LS_RETURN_IF_ERROR(way());
    before_timed();
    LS_RETURN_IF_ERROR(comm.Barrier(Deadline()));
    const double t0 = NowUs();
    LS_RETURN_IF_ERROR(way());
    return NowUs() - t0;
  };
  std::vector<double> separate, separate_async, together, together_bf16;
  int32_t ok = 1;
  for (int rep = 0; rep < kWarmup + kReps; ++rep) {
    const bool last = rep + 1 == kWarmup + kReps;
    LS_ASSIGN_OR_RETURN(double separate_us, second_run_us(run_separate, [] {}));
    // The last timed fused run is checked: its inputs are refilled first (sums in place grow).
    LS_ASSIGN_OR_RETURN(double fused_us, second_run_us(run_fused, [&] {
                          if (!last) return;
                          for (auto& v : t) Fill(c.rank, v.data(), v.size());
                        }));
    if (last) {
      for (auto& v : t) ok &= Check(c.np, v.data(), v.size()) ? 1 : 0;
    }
    LS_ASSIGN_OR_RETURN(double bf16_us, second_run_us(run_fused_bf16, [&] {
                          for (auto& v : t) Fill(c.rank, v.data(), v.size());
                        }));
    if (last) {
      for (auto& v : t) ok &= Check(c.np, v.data(), v.size()) ? 1 : 0;
    }
    // Refilled: the bf16 sums in place grow past bf16's exact integers (256) otherwise.
    for (auto& v : t) Fill(c.rank, v.data(), v.size());
    LS_ASSIGN_OR_RETURN(double async_us, second_run_us(run_separate_async, [] {}));
    if (rep >= kWarmup) {
      separate.push_back(separate_us);
      together.push_back(fused_us);
      together_bf16.push_back(bf16_us);
      separate_async.push_back(async_us);
    }
  }
  LS_RETURN_IF_ERROR(comm.AllReduce(&ok, &ok, 1, DType::kI32, ReduceOp::kMin, Deadline()));
  return absl::StrFormat(
      R"({"fusion":true,"tensors":%d,"tensor_bytes":%d,"bytes_per_pack":%d,"separate_us_p50":%.1f,"separate_async_us_p50":%.1f,"fused_us_p50":%.1f,"fused_bf16_us_p50":%.1f,"correct":%s})",
      kFusionTensors, kFusionFloats * sizeof(float), c.bytes_per_pack, Median(separate),
      Median(separate_async), Median(together), Median(together_bf16), ok ? "true" : "false");
}

}  // namespace

absl::Status RunBenchRank(const RankConfig& c) {
  collectives::FileStore store(c.store_dir);
  collectives::CommunicatorConfig config;
  config.rank = c.rank;
  config.world_size = c.np;
  config.transport = c.transport;
  config.secret = c.secret;
  config.key_prefix = c.key_prefix;
  config.algorithms.algorithm = c.algorithm;
  if (c.shm_spin >= 0) config.shm.spin_iterations = c.shm_spin;
  if (c.shm_yield >= 0) config.shm.yield_iterations = c.shm_yield;
  config.shm.cma_threshold_bytes = c.shm_cma_bytes;
  if (c.shm_ring_bytes > 0) config.shm.ring_bytes = c.shm_ring_bytes;
  if (c.tcp_congestion != "-") config.tcp.congestion_control = c.tcp_congestion;
  if (c.tcp_buffer_bytes >= 0) config.tcp.socket_buffer_bytes = c.tcp_buffer_bytes;
  config.tcp.busy_polls = c.tcp_busy_polls;
  if (c.tcp_send_window_bytes >= 0) config.tcp.send_window_bytes = c.tcp_send_window_bytes;
  config.tcp.encrypt = c.encrypt;
  if (c.chunk_bytes > 0) config.algorithms.chunk_bytes = c.chunk_bytes;
  if (c.ring_threshold_bytes > 0) config.algorithms.ring_threshold_bytes = c.ring_threshold_bytes;
  if (c.doubling_threshold_bytes > 0) {
    config.algorithms.doubling_threshold_bytes = c.doubling_threshold_bytes;
  }
  if (c.segment_bytes > 0) config.algorithms.segment_bytes = c.segment_bytes;
  uint64_t largest = 0;
  for (uint64_t b : c.sizes) largest = std::max(largest, b);
  if (c.shm_heap) {
    // Room for the largest size and the fusion tensors, as a trainer sizes it for its
    // gradients; the heap is only reserved by a shared-memory transport.
    config.shm.heap_bytes =
        largest + kFusionTensors * (kFusionFloats * sizeof(float) + 64) + (1 << 20);
    if (c.shm_direct_bytes > 0) config.shm.direct_threshold_bytes = c.shm_direct_bytes;
  }
  LS_ASSIGN_OR_RETURN(auto comm, collectives::CreateCommunicator(config, &store));
  Buffers buffers(comm->heap());
  LS_ASSIGN_OR_RETURN(float* buf, buffers.Allocate(largest / sizeof(float) + 16));
  std::ofstream out;
  if (c.rank == 0) out.open(c.results_path);
  for (uint64_t bytes : c.sizes) {
    LS_ASSIGN_OR_RETURN(std::string line, MeasureSize(*comm, c, bytes, buf));
    if (c.rank == 0) out << line << "\n" << std::flush;
  }
  if (c.fusion) {
    LS_ASSIGN_OR_RETURN(std::string line, MeasureFusion(*comm, c, buffers));
    if (c.rank == 0) out << line << "\n" << std::flush;
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace lockstep
