// AcceptHandshakes: the acceptor's side of the TCP transport's handshake (tcp_handshake.h)
// for every connection to a rank's listening socket (its data port while its group
// connects), run on the calling thread as one poll() loop.
//
// Each accepted connection is a small state machine, advanced only when its socket is ready:
//
//   accept -> kSendingHello -> kReadingProof -> kSendingAnswer -> proven (the caller's)
//                   \________________\________________\-------> closed (a bad proof, the
//                                                               peer closed, its time is up,
//                                                               or evicted)
//
// so that before a connection has proved the group's secret it costs a file descriptor and a
// few hundred bytes, never a thread, and never for long:
//   - each has `handshake_timeout` from its accept to prove itself, then is closed;
//   - at most `max_pending` prove themselves at once: a connection accepted at the cap
//     evicts the oldest pending one. An honest peer answers the hello within a round trip,
//     so the oldest is the likeliest stray; a flood then churns through the slots without
//     keeping a real peer out (its connector retries refused connections until its
//     deadline). The listen backlog should be at least max_pending.
// Refusals are logged (the first few one by one, then a count), as the caller's peers would
// otherwise only see a closed connection.
//
// Thread model: a blocking call on one thread; it owns the pending connections and closes
// every one it did not hand to `on_peer` before it returns.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_HANDSHAKE_ACCEPTOR_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_HANDSHAKE_ACCEPTOR_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/transport/tcp/socket_util.h"
#include "collectives/transport/tcp/tcp_handshake.h"

namespace lockstep {
namespace collectives {

struct HandshakeAcceptorOptions {
  // Connections proving themselves at once (TcpOptions::max_pending_handshakes).
  int max_pending = 64;
  // From a connection's accept to its proof and the answer sent (TcpOptions::
  // handshake_timeout).
  absl::Duration handshake_timeout = absl::Seconds(5);
  // Names the listener in logs ("rank 0 (jobs/j/1)").
  std::string who;
};

// Told of every connection that proved itself, with its socket (non-blocking): OK(true)
// when the caller took the socket, OK(false) to refuse it (it is closed here; the caller logs
// why), an error to stop accepting (returned as is).
using ProvenPeerFn = std::function<absl::StatusOr<bool>(UniqueFd& fd, const AcceptedPeer& peer)>;

// Accepts on `listen_fd` (made non-blocking here) until `wanted` connections were taken by
// `on_peer`: OK. DEADLINE_EXCEEDED at `deadline` (the caller names who is missing); an error
// of `on_peer`; UNAVAILABLE when the listener fails.
absl::Status AcceptHandshakes(int listen_fd, const HandshakeIdentity& me,
                              const HandshakeAcceptorOptions& options, int wanted,
                              absl::Time deadline, const ProvenPeerFn& on_peer);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_HANDSHAKE_ACCEPTOR_H_
