#include "worker/coordinator_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {

CoordinatorStore::CoordinatorStore(WorkerServiceClient* client, std::string prefix, Clock* clock,
                                   absl::Duration poll_slice)
    : client_(client), prefix_(std::move(prefix)), clock_(clock), poll_slice_(poll_slice) {}

std::string CoordinatorStore::Scoped(absl::string_view key) const {
  return absl::StrCat(prefix_, "/", key);
}

bool CoordinatorStore::aborted() const {
  absl::MutexLock l(&mu_);
  return aborted_;
}

void CoordinatorStore::Abort() {
  absl::MutexLock l(&mu_);
  aborted_ = true;
}

absl::Status CoordinatorStore::Set(absl::string_view key, absl::string_view value) {
  if (aborted()) return absl::AbortedError(absl::StrCat("store ", prefix_, " was aborted"));
  return client_->SetKey(Scoped(key), std::string(value), /*overwrite=*/false);
}

absl::StatusOr<std::string> CoordinatorStore::Get(absl::string_view key, absl::Time deadline) {
  const std::string scoped = Scoped(key);
  while (true) {
    if (aborted()) {
      return absl::AbortedError(
          absl::StrCat("store ", prefix_, " was aborted while waiting for \"", scoped, "\""));
    }
    absl::Duration left = deadline - clock_->Now();
    absl::StatusOr<std::string> v =
        client_->GetKey(scoped, std::max(absl::ZeroDuration(), std::min(left, poll_slice_)));
    if (v.ok() || !absl::IsDeadlineExceeded(v.status())) return v;
    if (clock_->Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "key \"", scoped, "\" was not published by the deadline; check that every rank of ",
          prefix_, " is running (lockstep status)"));
    }
  }
}

}  // namespace worker
}  // namespace lockstep
