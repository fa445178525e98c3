// The TCP transport's connection handshake: a magic number, then mutual proof of the group's
// secret by HMAC-SHA256 over fresh nonces, so that a stray or wrong-secret connection is
// refused before any byte of a tensor is read from it.
//
//   acceptor  -> connector : magic, version, nonce_a
//   connector -> acceptor  : magic, rank, world, nonce_c,
//                            HMAC(secret, "connect" | group | nonce_a | nonce_c | rank | world)
//   acceptor  -> connector : HMAC(secret, "accept" | group | nonce_c | nonce_a | acceptor rank)
//
// `group` (the Store key prefix) binds the proof to one group, so a peer of another job or
// attempt with the same secret is refused too. Every read is bounded by `deadline`.
// Thread model: free functions over a blocking-with-deadline socket.
#ifndef LOCKSTEP_COLLECTIVES_TCP_HANDSHAKE_H_
#define LOCKSTEP_COLLECTIVES_TCP_HANDSHAKE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace collectives {

constexpr uint64_t kHandshakeMagic = 0x4c4f434b53544550ull;  // "LOCKSTEP"

struct HandshakeIdentity {
  std::string secret;
  std::string group;
  int rank = 0;
  int world_size = 1;
};

// Connector side: proves itself to rank `expected_peer`, checks the acceptor's proof.
// UNAUTHENTICATED on a bad proof or magic, UNAVAILABLE/DEADLINE_EXCEEDED on I/O.
absl::Status HandshakeAsConnector(int fd, const HandshakeIdentity& me, int expected_peer,
                                  absl::Time deadline);

// Acceptor side: returns the connector's proven rank (INVALID_ARGUMENT if out of range).
absl::StatusOr<int> HandshakeAsAcceptor(int fd, const HandshakeIdentity& me, absl::Time deadline);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TCP_HANDSHAKE_H_
