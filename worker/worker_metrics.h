// WorkerMetrics: what lockstepd shows Prometheus (`--metrics_address`), named lockstep_worker_*:
//   steps_total, examples_total, examples_per_second (over the last summary window),
//   step_seconds (histogram of whole steps) and step_phase_seconds{phase=compute|
//   allreduce_wait|apply|input_wait} (where a step's time went: distribute::StepTimes, and
//   the wait for the input pipeline before it),
//   allreduce_bytes_total / allreduce_seconds_total / allreduce_algbw_bytes_per_second /
//   allreduce_busbw_bytes_per_second{size=le_4KiB|le_64KiB|le_1MiB|le_16MiB|gt_16MiB}
//   (the gradient all-reduces by payload size; the bandwidths of the last one in each size:
//   algbw = bytes / time, busbw = algbw * 2(n-1)/n),
//   peer_sent_bytes_total / peer_received_bytes_total{peer=RANK} (every message of the
//   collectives, by the peer's rank in its group),
//   checkpoint_write_seconds (histogram) and checkpoint_bytes_total,
//   gpu_peak_bytes / gpu_reserved_bytes{device="/gpu:N"} (a GPU job's device memory: the
//   peak of the bytes its tensors held since the job started, and the bytes the caching
//   allocator holds from the device; as of the last summary window).
// It is the collectives' observer (CommunicatorConfig::observer) and the training loop's
// (JobExecutorOptions::metrics); the series live in a MetricsRegistry.
//
// Ownership: borrows the registry (must outlive it). Thread model: thread-safe (the
// collectives' threads and the training loop call it at once).
#ifndef LOCKSTEP_WORKER_WORKER_METRICS_H_
#define LOCKSTEP_WORKER_WORKER_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/collective_observer.h"
#include "common/metrics.h"
#include "distribute/trainer.h"

namespace lockstep {
namespace worker {

class WorkerMetrics final : public collectives::CollectiveObserver {
 public:
  explicit WorkerMetrics(MetricsRegistry* registry);

  // A training step finished; `input_wait`: how long it waited for its input before.
  void StepDone(const distribute::TrainStepResult& result, absl::Duration input_wait);
  // A summary window closed with this throughput.
  void WindowClosed(double examples_per_sec);
  // This worker wrote its copy of a checkpoint: `bytes` in `time`.
  void CheckpointWritten(absl::Duration time, int64_t bytes);
  // A GPU's device memory as the running job's summary window closed (JobDeviceMemory).
  void DeviceMemory(const std::string& device, uint64_t peak_bytes, uint64_t reserved_bytes);

  // collectives::CollectiveObserver
  void AllReduceDone(size_t bytes, absl::Duration time, int group_size) override;
  bool counts_bytes() const override { return true; }
  void Sent(int peer, size_t bytes) override;
  void Received(int peer, size_t bytes) override;

  // The size bucket of an all-reduce of `bytes` ("le_64KiB", ...).
  static int SizeBucket(size_t bytes);
  static constexpr int kSizeBuckets = 5;

 private:
  // The counters of one peer rank.
  struct PeerCounters {
    Counter sent;
    Counter received;
  };
  // One size bucket's series.
  struct SizeSeries {
    Counter bytes;
    Counter seconds;
    Gauge algbw;
    Gauge busbw;
  };
  // The gauges of one GPU.
  struct DeviceGauges {
    Gauge peak;
    Gauge reserved;
  };
  PeerCounters Peer(int peer);
  DeviceGauges Device(const std::string& device);

  MetricsRegistry* const registry_;
  const Counter steps_;
  const Counter examples_;
  const Gauge examples_per_sec_;
  const Histogram step_seconds_;
  const Histogram compute_seconds_;
  const Histogram allreduce_wait_seconds_;
  const Histogram apply_seconds_;
  const Histogram input_wait_seconds_;
  const Histogram checkpoint_seconds_;
  const Counter checkpoint_bytes_;
  std::array<SizeSeries, kSizeBuckets> sizes_;

  absl::Mutex mu_;
  absl::flat_hash_map<int, PeerCounters> peers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, DeviceGauges> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_METRICS_H_
