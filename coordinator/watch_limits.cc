#include "coordinator/watch_limits.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace coordinator {

WatchLimits::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), key_(std::move(other.key_)) {}

WatchLimits::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(key_);
}

absl::StatusOr<WatchLimits::Slot> WatchLimits::OpenJobWatch() {
  return Open("", options_.max_job_watches,
              absl::StrCat(options_.max_job_watches,
                           " WatchJob and GetJobLogs streams are open, the limit (coordinator "
                           "flag --max_job_watches); close a `lockstep watch` or `lockstep "
                           "logs --follow`, or raise it"));
}

absl::StatusOr<WatchLimits::Slot> WatchLimits::OpenIdentityStream(const std::string& identity) {
  if (identity.empty()) return Slot(nullptr, "");
  return Open(absl::StrCat("identity:", identity), options_.max_streams_per_identity,
              absl::StrCat(identity, " has ", options_.max_streams_per_identity,
                           " streams open (watch, assignments, logs), the limit (coordinator "
                           "flag --max_streams_per_identity); close some"));
}

absl::StatusOr<WatchLimits::Slot> WatchLimits::OpenAssignmentWatch(const std::string& task) {
  return Open(task, options_.max_assignment_watches_per_task,
              absl::StrCat(task, " has ", options_.max_assignment_watches_per_task,
                           " WatchAssignments streams open, the limit (coordinator flag "
                           "--max_assignment_watches_per_task); is a second lockstepd "
                           "using its identity?"));
}

int WatchLimits::open(const std::string& key) const {
  absl::MutexLock l(&mu_);
  auto it = open_.find(key);
  return it == open_.end() ? 0 : it->second;
}

absl::StatusOr<WatchLimits::Slot> WatchLimits::Open(const std::string& key, int limit,
                                                    const std::string& what) {
  absl::MutexLock l(&mu_);
  int& n = open_[key];
  if (n >= limit) {
    if (n == 0) open_.erase(key);
    return absl::ResourceExhaustedError(what);
  }
  ++n;
  return Slot(this, key);
}

void WatchLimits::Release(const std::string& key) {
  absl::MutexLock l(&mu_);
  auto it = open_.find(key);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

}  // namespace coordinator
}  // namespace lockstep
