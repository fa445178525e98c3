#include "worker/worker_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {
namespace {

constexpr const char* kSizeNames[WorkerMetrics::kSizeBuckets] = {"le_4KiB", "le_64KiB", "le_1MiB",
                                                                 "le_16MiB", "gt_16MiB"};
constexpr size_t kSizeBounds[WorkerMetrics::kSizeBuckets - 1] = {4 << 10, 64 << 10, 1 << 20,
                                                                 16 << 20};

// 100 µs .. ~100 s: steps, their phases and checkpoint writes.
std::vector<double> SecondsBuckets() { return ExponentialBuckets(1e-4, 2.5, 16); }

Histogram Phase(MetricsRegistry* r, const char* phase) {
  return r->AddHistogram("lockstep_worker_step_phase_seconds",
                         "Where a training step's time went: compute (forward and backward, "
                         "all-reduces overlapped), allreduce_wait, apply (optimizer), "
                         "input_wait (before the step).",
                         SecondsBuckets(), {{"phase", phase}});
}

}  // namespace

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry)
    : registry_(registry),
      steps_(registry->AddCounter("lockstep_worker_steps_total", "Training steps completed.")),
      examples_(registry->AddCounter("lockstep_worker_examples_total",
                                     "Examples trained on (this worker's share of each batch).")),
      examples_per_sec_(registry->AddGauge(
          "lockstep_worker_examples_per_second",
          "Examples per second of the whole group over the last summary window.")),
      step_seconds_(registry->AddHistogram("lockstep_worker_step_seconds", "Training step time.",
                                           SecondsBuckets())),
      compute_seconds_(Phase(registry, "compute")),
      allreduce_wait_seconds_(Phase(registry, "allreduce_wait")),
      apply_seconds_(Phase(registry, "apply")),
      input_wait_seconds_(Phase(registry, "input_wait")),
      checkpoint_seconds_(registry->AddHistogram("lockstep_worker_checkpoint_write_seconds",
                                                 "Time to write this worker's checkpoint copy.",
                                                 SecondsBuckets())),
      checkpoint_bytes_(registry->AddCounter("lockstep_worker_checkpoint_bytes_total",
                                             "Bytes of checkpoints written.")) {
  for (int b = 0; b < kSizeBuckets; ++b) {
    const MetricLabels size = {{"size", kSizeNames[b]}};
    sizes_[b].bytes = registry->AddCounter("lockstep_worker_allreduce_bytes_total",
                                           "Gradient all-reduce payload bytes, by size.", size);
    sizes_[b].seconds = registry->AddCounter("lockstep_worker_allreduce_seconds_total",
                                             "Gradient all-reduce running time, by size.", size);
    sizes_[b].algbw = registry->AddGauge(
        "lockstep_worker_allreduce_algbw_bytes_per_second",
        "Algorithm bandwidth (bytes / time) of the last gradient all-reduce of this size.", size);
    sizes_[b].busbw = registry->AddGauge(
        "lockstep_worker_allreduce_busbw_bytes_per_second",
        "Bus bandwidth (algbw * 2(n-1)/n) of the last gradient all-reduce of this size.", size);
  }
}

int WorkerMetrics::SizeBucket(size_t bytes) {
  for (int b = 0; b < kSizeBuckets - 1; ++b) {
    if (bytes <= kSizeBounds[b]) return b;
  }
  return kSizeBuckets - 1;
}

void WorkerMetrics::StepDone(const distribute::TrainStepResult& result, absl::Duration input_wait) {
  steps_.Increment();
  examples_.Increment(static_cast<double>(result.examples));
  step_seconds_.Observe(absl::ToDoubleSeconds(result.times.total));
  compute_seconds_.Observe(absl::ToDoubleSeconds(result.times.compute));
  allreduce_wait_seconds_.Observe(absl::ToDoubleSeconds(result.times.allreduce_wait));
  apply_seconds_.Observe(absl::ToDoubleSeconds(result.times.apply));
  input_wait_seconds_.Observe(absl::ToDoubleSeconds(input_wait));
}

void WorkerMetrics::WindowClosed(double examples_per_sec) {
  examples_per_sec_.Set(examples_per_sec);
}

void WorkerMetrics::CheckpointWritten(absl::Duration time, int64_t bytes) {
  checkpoint_seconds_.Observe(absl::ToDoubleSeconds(time));
  checkpoint_bytes_.Increment(static_cast<double>(bytes));
}

void WorkerMetrics::AllReduceDone(size_t bytes, absl::Duration time, int group_size) {
  const SizeSeries& s = sizes_[SizeBucket(bytes)];
  const double seconds = absl::ToDoubleSeconds(time);
  s.bytes.Increment(static_cast<double>(bytes));
  s.seconds.Increment(seconds);
  if (seconds <= 0 || group_size < 1) return;
  const double algbw = static_cast<double>(bytes) / seconds;
  s.algbw.Set(algbw);
  s.busbw.Set(algbw * 2.0 * (group_size - 1) / group_size);
}

WorkerMetrics::PeerCounters WorkerMetrics::Peer(int peer) {
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = peers_.find(peer);
    if (it != peers_.end()) return it->second;
  }
  const MetricLabels labels = {{"peer", absl::StrCat(peer)}};
  PeerCounters c{registry_->AddCounter("lockstep_worker_peer_sent_bytes_total",
                                       "Bytes the collectives sent to a peer rank.", labels),
                 registry_->AddCounter("lockstep_worker_peer_received_bytes_total",
                                       "Bytes the collectives received from a peer rank.", labels)};
  absl::MutexLock l(&mu_);
  peers_.emplace(peer, c);
  return c;
}

WorkerMetrics::DeviceGauges WorkerMetrics::Device(const std::string& device) {
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
  }
  const MetricLabels labels = {{"device", device}};
  DeviceGauges g{
      registry_->AddGauge("lockstep_worker_gpu_peak_bytes",
                          "Peak bytes of device memory the running GPU job's tensors held.",
                          labels),
      registry_->AddGauge("lockstep_worker_gpu_reserved_bytes",
                          "Bytes of device memory the caching allocator holds (in use + cached).",
                          labels)};
  absl::MutexLock l(&mu_);
  return devices_.emplace(device, g).first->second;
}

void WorkerMetrics::DeviceMemory(const std::string& device, uint64_t peak_bytes,
                                 uint64_t reserved_bytes) {
  const DeviceGauges g = Device(device);
  g.peak.Set(static_cast<double>(peak_bytes));
  g.reserved.Set(static_cast<double>(reserved_bytes));
}

void WorkerMetrics::Sent(int peer, size_t bytes) {
  Peer(peer).sent.Increment(static_cast<double>(bytes));
}

void WorkerMetrics::Received(int peer, size_t bytes) {
  Peer(peer).received.Increment(static_cast<double>(bytes));
}

}  // namespace worker
}  // namespace lockstep
