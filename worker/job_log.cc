#include "worker/job_log.h"

#include <algorithm>
#include <utility>

namespace lockstep {
namespace worker {

JobLog::JobLog(Clock* clock, size_t capacity, size_t batch)
    : clock_(clock), capacity_(std::max<size_t>(1, capacity)), batch_(std::max<size_t>(1, batch)) {}

void JobLog::Add(std::string text) {
  const int64_t now = absl::ToUnixMicros(clock_->Now());
  absl::MutexLock l(&mu_);
  v1::LogLine line;
  line.set_seq(next_seq_++);
  line.set_unix_micros(now);
  line.set_text(std::move(text));
  lines_.push_back(std::move(line));
  if (lines_.size() > capacity_) lines_.pop_front();
}

std::vector<v1::LogLine> JobLog::Pending() const {
  absl::MutexLock l(&mu_);
  std::vector<v1::LogLine> out;
  for (const v1::LogLine& line : lines_) {
    if (line.seq() <= delivered_) continue;
    out.push_back(line);
    if (out.size() == batch_) break;
  }
  return out;
}

void JobLog::Delivered(int64_t up_to_seq) {
  absl::MutexLock l(&mu_);
  delivered_ = std::max(delivered_, up_to_seq);
}

std::vector<v1::LogLine> JobLog::Lines() const {
  absl::MutexLock l(&mu_);
  return std::vector<v1::LogLine>(lines_.begin(), lines_.end());
}

}  // namespace worker
}  // namespace lockstep
