#include "collectives/nccl/abort_signal.h"

#include "absl/strings/str_cat.h"
#include "collectives/transport/peer_failure.h"

namespace lockstep::collectives::nccl {

void AbortSignal::PeerLost(int rank, std::string reason) {
  {
    absl::MutexLock lock(&mu_);
    if (signalled_) return;
    signalled_ = true;
    lost_rank_ = rank;
    reason_ = std::move(reason);
  }
  WakeListeners();
}

void AbortSignal::Abort() {
  {
    absl::MutexLock lock(&mu_);
    if (signalled_) return;
    signalled_ = true;
  }
  WakeListeners();
}

void AbortSignal::WakeListeners() {
  absl::MutexLock lock(&listeners_mu_);
  for (auto& [id, wake] : listeners_) wake();
}

int AbortSignal::AddListener(std::function<void()> wake) {
  absl::MutexLock lock(&listeners_mu_);
  const int id = next_listener_++;
  bool signalled;
  {
    absl::MutexLock state(&mu_);
    signalled = signalled_;
  }
  if (signalled) wake();
  listeners_.emplace(id, std::move(wake));
  return id;
}

void AbortSignal::RemoveListener(int id) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(id);
}

absl::Status AbortSignal::Check(int rank, absl::string_view what) const {
  absl::MutexLock lock(&mu_);
  if (!signalled_) return absl::OkStatus();
  if (lost_rank_.has_value()) {
    return PeerFailure(*lost_rank_, absl::StrCat("rank ", rank, ": NCCL ", what, " aborted: rank ",
                                                 *lost_rank_, " was lost (", reason_, ")"));
  }
  return absl::AbortedError(absl::StrCat("rank ", rank, ": NCCL ", what, " aborted"));
}

}  // namespace lockstep::collectives::nccl
