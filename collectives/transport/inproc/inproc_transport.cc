#include "collectives/transport/inproc/inproc_transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/transport/peer_failure.h"
#include "collectives/transport/piece_cursor.h"

namespace lockstep {
namespace collectives {

InProcHub::InProcHub(int world_size)
    : world_size_(world_size),
      mailbox_(static_cast<size_t>(world_size) * world_size),
      aborted_(world_size, false),
      failed_rank_(world_size, -1) {}

absl::Status InProcTransport::SendRecv(const SendSpec& send, const RecvSpec& recv,
                                       absl::Time deadline) {
  const int n = hub_->world_size_;
  absl::MutexLock lock(&hub_->mu_);
  if (hub_->aborted_[rank_]) return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
  if (send.peer != kNoPeer && send.len > 0) {
    if (hub_->aborted_[send.peer]) return PeerLeft(send.peer);
    std::string msg(send.len, '\0');
    PieceCursor(send).CopyOut(msg.data(), send.len);
    hub_->mailbox_[rank_ * n + send.peer].push_back(std::move(msg));
  }
  if (recv.peer == kNoPeer || recv.len == 0) return absl::OkStatus();
  auto& box = hub_->mailbox_[recv.peer * n + rank_];
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
    return !box.empty() || hub_->aborted_[rank_] || hub_->aborted_[recv.peer];
  };
  hub_->mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (hub_->aborted_[rank_]) return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
  if (box.empty()) {
    if (hub_->aborted_[recv.peer]) return PeerLeft(recv.peer);
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", rank_, ": deadline passed waiting for a message from rank ", recv.peer));
  }
  std::string msg = std::move(box.front());
  box.pop_front();
  if (msg.size() != recv.len) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": message from rank ", recv.peer,
                                            " has ", msg.size(), " bytes, expected ", recv.len,
                                            "; ranks issued different collectives"));
  }
  if (recv.sink != nullptr) {
    (*recv.sink)(0, msg.data(), msg.size());
  } else {
    PieceCursor(recv).CopyIn(msg.data(), msg.size());
  }
  return absl::OkStatus();
}

void InProcTransport::Abort() {
  absl::MutexLock lock(&hub_->mu_);
  hub_->aborted_[rank_] = true;
}

void InProcTransport::AbortOnPeerFailure(int failed_rank) {
  absl::MutexLock lock(&hub_->mu_);
  hub_->failed_rank_[rank_] = failed_rank;
  hub_->aborted_[rank_] = true;
}

absl::Status InProcTransport::PeerLeft(int peer) const {
  const int failed = hub_->failed_rank_[peer];
  if (failed >= 0 && failed != peer) {
    return RelayedPeerFailure(rank_, peer, failed, "exchanging with");
  }
  return PeerFailure(peer, absl::StrCat("rank ", rank_, ": peer rank ", peer, " has aborted"));
}

}  // namespace collectives
}  // namespace lockstep
