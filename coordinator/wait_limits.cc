#include "coordinator/wait_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace coordinator {
namespace {

int CountOf(const std::map<std::string, int>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

void Decrement(std::map<std::string, int>& counts, const std::string& key) {
  auto it = counts.find(key);
  if (it != counts.end() && --it->second <= 0) counts.erase(it);
}

}  // namespace

absl::Status WaitLimits::Acquire(const std::string& scope, const std::string& caller,
                                 const std::string& call, const std::string& scope_name) {
  if (const int n = CountOf(per_job_, scope); n >= options_.max_per_job) {
    return absl::ResourceExhaustedError(absl::StrCat(
        call, ": ", n, " calls of ", scope_name,
        " already wait, the limit (coordinator flag --max_waiting_calls_per_job); retry later"));
  }
  if (const int n = CountOf(per_caller_, caller); n >= options_.max_per_caller) {
    return absl::ResourceExhaustedError(absl::StrCat(
        call, ": ", n, " calls of ", caller.empty() ? "this caller" : caller,
        " already wait, the limit (coordinator flag --max_waiting_calls_per_caller); is a "
        "worker retrying without waiting for its answers?"));
  }
  ++per_job_[scope];
  ++per_caller_[caller];
  return absl::OkStatus();
}

void WaitLimits::Release(const std::string& scope, const std::string& caller) {
  Decrement(per_job_, scope);
  Decrement(per_caller_, caller);
}

absl::Time WaitLimits::Clamp(absl::Time now, absl::Time deadline) const {
  return std::min(deadline, now + options_.max_wait);
}

std::string WaitLimits::ClampNote(absl::Time now, absl::Time requested) const {
  if (requested <= now + options_.max_wait) return "";
  return absl::StrCat(" (the wait was cut to ", absl::FormatDuration(options_.max_wait),
                      ", coordinator flag --max_wait_ms; ask again)");
}

int WaitLimits::waiting_in(const std::string& scope) const { return CountOf(per_job_, scope); }

int WaitLimits::waiting_of(const std::string& caller) const { return CountOf(per_caller_, caller); }

}  // namespace coordinator
}  // namespace lockstep
