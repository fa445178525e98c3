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
// The three messages are built and checked by pure functions over byte buffers (below), which
// the two sides call around their socket reads and writes; they are unit-tested and fuzzed
// (fuzz/tcp_handshake_fuzzer.cc) apart from any socket.
// Thread model: free functions; the connector's side runs over a blocking-with-deadline socket.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_HANDSHAKE_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_HANDSHAKE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep {
namespace collectives {

constexpr uint64_t kHandshakeMagic = 0x4c4f434b53544550ull;  // "LOCKSTEP"

struct HandshakeIdentity {
  std::string secret;
  std::string group;
  int rank = 0;
  int world_size = 1;
  // The connection's bytes will be encrypted (frame_cipher.h). Both MACs cover it, so ranks
  // that disagree refuse each other in the handshake instead of misreading the stream.
  bool encrypt = false;
};

// The messages on the wire, in host byte order (both ends run on one kind of host).
using HandshakeNonce = std::array<unsigned char, 32>;
constexpr size_t kHelloBytes = 48;   // magic u64, version u32, pad u32, nonce_a
constexpr size_t kProofBytes = 80;   // magic u64, rank i32, world i32, nonce_c, mac
constexpr size_t kAnswerBytes = 32;  // the acceptor's mac

// Both fresh nonces of a handshake: what makes each connection's key its own (frame_cipher.h).
struct HandshakeNonces {
  HandshakeNonce acceptor{};   // nonce_a
  HandshakeNonce connector{};  // nonce_c
};

// The acceptor's hello.
std::string EncodeHello(const HandshakeNonce& nonce_a);
// The connector's check of the hello read from rank `expected_peer`: returns nonce_a.
// UNAUTHENTICATED on a wrong magic number or version; INVALID_ARGUMENT when `bytes` is not
// kHelloBytes long.
absl::StatusOr<HandshakeNonce> ParseHello(absl::string_view bytes, int expected_peer);

// The connector's proof: its rank and world size from `me`, and its MAC over both nonces.
std::string EncodeProof(const HandshakeIdentity& me, const HandshakeNonce& nonce_a,
                        const HandshakeNonce& nonce_c);
// What the acceptor learns from a proof that checks out.
struct ProvenPeer {
  int rank = 0;
  HandshakeNonce nonce_c{};
};
// The acceptor's check of a proof, after it sent `nonce_a`: UNAUTHENTICATED on a wrong magic
// number or MAC, INVALID_ARGUMENT when the proven rank or world size does not fit `me`'s
// group or `bytes` is not kProofBytes long.
absl::StatusOr<ProvenPeer> CheckProof(absl::string_view bytes, const HandshakeIdentity& me,
                                      const HandshakeNonce& nonce_a);

// The acceptor's answer: its MAC over both nonces and its own rank.
std::string EncodeAnswer(const HandshakeIdentity& me, const HandshakeNonce& nonce_c,
                         const HandshakeNonce& nonce_a);
// The connector's check of rank `expected_peer`'s answer: UNAUTHENTICATED unless it proves the
// group secret.
absl::Status CheckAnswer(absl::string_view bytes, const HandshakeIdentity& me,
                         const HandshakeNonce& nonce_c, const HandshakeNonce& nonce_a,
                         int expected_peer);

// Connector side: proves itself to rank `expected_peer`, checks the acceptor's proof; returns
// the handshake's nonces. UNAUTHENTICATED on a bad proof or magic, UNAVAILABLE/DEADLINE_EXCEEDED
// on I/O.
absl::StatusOr<HandshakeNonces> HandshakeAsConnector(int fd, const HandshakeIdentity& me,
                                                     int expected_peer, absl::Time deadline);

// What the acceptor learns from a connection that proved itself: the connector's rank and the
// handshake's nonces. The acceptor's side runs on non-blocking sockets in one poll() loop for
// every connection at once (handshake_acceptor.h), over the functions above.
struct AcceptedPeer {
  int rank = 0;
  HandshakeNonces nonces;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_HANDSHAKE_H_
