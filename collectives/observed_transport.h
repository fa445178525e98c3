// ObservedTransport: a Transport that forwards everything to another and tells a
// CollectiveObserver the bytes of every message that moved, by peer. What Communicator wraps
// its transport in when it is given an observer.
//
// Ownership: owns the wrapped transport, borrows the observer. Thread model: the wrapped
// transport's.
#ifndef LOCKSTEP_COLLECTIVES_OBSERVED_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_OBSERVED_TRANSPORT_H_

#include <memory>

#include "collectives/collective_observer.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

class ObservedTransport final : public Transport {
 public:
  ObservedTransport(std::unique_ptr<Transport> inner, CollectiveObserver* observer)
      : inner_(std::move(inner)), observer_(observer) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  // Counts the message halves that moved (a failed call counts nothing).
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override;
  void Abort() override { inner_->Abort(); }
  void AbortOnPeerFailure(int failed_rank) override { inner_->AbortOnPeerFailure(failed_rank); }
  std::shared_ptr<TransportHeap> heap() const override { return inner_->heap(); }

 private:
  const std::unique_ptr<Transport> inner_;
  CollectiveObserver* const observer_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_OBSERVED_TRANSPORT_H_
