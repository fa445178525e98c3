#include "worker/flight_recorder.h"

#include <utility>

namespace lockstep {
namespace worker {

FlightRecorder::FlightRecorder(std::string job_id, int attempt, int worker_rank, Clock* clock,
                               FlightRecorderOptions options)
    : job_id_(std::move(job_id)),
      attempt_(attempt),
      worker_rank_(worker_rank),
      clock_(clock),
      options_(options),
      phase_entered_(clock->Now()) {}

void FlightRecorder::OnEnter(const collectives::CollectiveCall& call) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  if (options_.capacity == 0) return;
  if (entries_.size() == options_.capacity) entries_.pop_front();
  entries_.push_back({call.seq, call.kind, call.bytes, now, absl::InfinitePast(), false});
  last_entered_ = call.seq;
}

void FlightRecorder::OnLeave(const collectives::CollectiveCall& call, const absl::Status& status) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  last_left_ = call.seq;
  // Collectives run one at a time: the one leaving is the newest entry.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->seq != call.seq) continue;
    it->left = now;
    it->failed = !status.ok();
    break;
  }
}

void FlightRecorder::SetPhase(v1::TrainPhase phase, int64_t step) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  if (step < 0) step = step_;
  if (phase == phase_ && step == step_) return;
  phase_ = phase;
  step_ = step;
  phase_entered_ = now;
}

void FlightRecorder::EndStep(absl::Duration compute, absl::Duration total) {
  absl::MutexLock l(&mu_);
  steps_.emplace_back(compute, total);
  compute_sum_ += compute;
  total_sum_ += total;
  while (static_cast<int>(steps_.size()) > options_.window_steps) {
    compute_sum_ -= steps_.front().first;
    total_sum_ -= steps_.front().second;
    steps_.pop_front();
  }
}

v1::FlightRecord FlightRecorder::Snapshot() const {
  v1::FlightRecord r;
  r.set_job_id(job_id_);
  r.set_attempt(attempt_);
  r.set_worker_rank(worker_rank_);
  const absl::Time now = clock_->Now();
  r.set_recorded_unix_micros(absl::ToUnixMicros(now));
  absl::MutexLock l(&mu_);
  r.set_phase(phase_);
  r.set_step(step_);
  r.set_phase_entered_unix_micros(absl::ToUnixMicros(phase_entered_));
  r.set_last_seq_entered(last_entered_);
  r.set_last_seq_left(last_left_);
  for (const Entry& e : entries_) {
    v1::CollectiveRecord* c = r.add_collectives();
    c->set_seq(e.seq);
    c->set_kind(e.kind);
    c->set_bytes(static_cast<int64_t>(e.bytes));
    c->set_entered_unix_micros(absl::ToUnixMicros(e.entered));
    if (e.left != absl::InfinitePast()) c->set_left_unix_micros(absl::ToUnixMicros(e.left));
    c->set_failed(e.failed);
  }
  if (!steps_.empty()) {
    const double n = static_cast<double>(steps_.size());
    r.set_window_steps(static_cast<int>(steps_.size()));
    r.set_mean_compute_ms(absl::ToDoubleMilliseconds(compute_sum_) / n);
    r.set_mean_step_ms(absl::ToDoubleMilliseconds(total_sum_) / n);
  }
  return r;
}

}  // namespace worker
}  // namespace lockstep
