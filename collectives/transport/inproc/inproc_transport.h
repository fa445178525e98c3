// InProcTransport: ranks are threads of one process; messages go through an InProcHub of
// per-pair mailboxes (for tests: every send copies into a new string).
//
// The hub is shared (std::shared_ptr) by the `world_size` transports made from it, one per
// rank. Thread model: each transport is used by its rank's thread; the hub is thread-safe.
// Abort() on one rank's transport fails that rank's calls and makes peers waiting on it
// return UNAVAILABLE, like a closed connection (naming the rank a failure started at, as
// the other transports do: peer_failure.h).
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

class InProcHub {
 public:
  explicit InProcHub(int world_size);
  int world_size() const { return world_size_; }

 private:
  friend class InProcTransport;
  const int world_size_;
  absl::Mutex mu_;
  // mailbox_[from * n + to]
  std::vector<std::deque<std::string>> mailbox_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> aborted_ ABSL_GUARDED_BY(mu_);
  // failed_rank_[r]: the rank whose failure made rank r abort (AbortOnPeerFailure), or -1.
  std::vector<int> failed_rank_ ABSL_GUARDED_BY(mu_);
};

class InProcTransport final : public Transport {
 public:
  InProcTransport(std::shared_ptr<InProcHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->world_size(); }
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override;
  void Abort() override;
  void AbortOnPeerFailure(int failed_rank) override;

 private:
  // UNAVAILABLE: `peer` has aborted (naming the rank its failure started at, if it said).
  absl::Status PeerLeft(int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_);

  std::shared_ptr<InProcHub> hub_;
  const int rank_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_INPROC_INPROC_TRANSPORT_H_
