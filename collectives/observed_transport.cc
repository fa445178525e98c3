#include "collectives/observed_transport.h"

namespace lockstep {
namespace collectives {

absl::Status ObservedTransport::SendRecv(const SendSpec& send, const RecvSpec& recv,
                                         absl::Time deadline) {
  absl::Status s = inner_->SendRecv(send, recv, deadline);
  if (!s.ok()) return s;
  if (send.peer != kNoPeer && send.len > 0) observer_->Sent(send.peer, send.len);
  if (recv.peer != kNoPeer && recv.len > 0) observer_->Received(recv.peer, recv.len);
  return s;
}

}  // namespace collectives
}  // namespace lockstep
