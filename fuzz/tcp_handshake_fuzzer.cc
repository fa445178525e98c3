// Fuzz target: the checks the TCP transport's handshake makes on what a peer sends
// (collectives/transport/tcp/tcp_handshake.h). The first byte picks the message:
//   0  the rest is an acceptor's hello, read by a connector (ParseHello);
//   1  the rest is a connector's proof, read by an acceptor (CheckProof);
//   2  the rest gives a rank, a world size and a nonce that a holder of the group's secret
//      signs (EncodeProof): the proof's MAC is right, so the acceptor's checks of the claimed
//      rank and world size behind the MAC are reached;
//   3  the rest is an acceptor's answer, read by a connector (CheckAnswer).
// An accepted proof must name a rank of the acceptor's group.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "collectives/transport/tcp/tcp_handshake.h"

namespace {

using lockstep::collectives::HandshakeIdentity;
using lockstep::collectives::HandshakeNonce;

const HandshakeIdentity& Acceptor() {
  static const HandshakeIdentity* const me = new HandshakeIdentity{"secret", "jobs/j/0", 1, 4};
  return *me;
}

HandshakeNonce Fill(unsigned char c) {
  HandshakeNonce n;
  n.fill(c);
  return n;
}

void CheckAccepted(absl::string_view proof) {
  absl::StatusOr<lockstep::collectives::ProvenPeer> peer =
      lockstep::collectives::CheckProof(proof, Acceptor(), Fill(0xa));
  if (peer.ok() && (peer->rank < 0 || peer->rank >= Acceptor().world_size)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] & 3) {
    case 0:
      (void)lockstep::collectives::ParseHello(rest, 2);
      break;
    case 1:
      CheckAccepted(rest);
      break;
    case 2: {
      HandshakeIdentity claimed = Acceptor();
      HandshakeNonce nonce_c{};
      std::memcpy(&claimed.rank, rest.data(), std::min(rest.size(), sizeof(int32_t)));
      if (rest.size() > 4) {
        std::memcpy(&claimed.world_size, rest.data() + 4,
                    std::min(rest.size() - 4, sizeof(int32_t)));
      }
      if (rest.size() > 8)
        std::memcpy(nonce_c.data(), rest.data() + 8, std::min(rest.size() - 8, nonce_c.size()));
      CheckAccepted(lockstep::collectives::EncodeProof(claimed, Fill(0xa), nonce_c));
      break;
    }
    default:
      (void)lockstep::collectives::CheckAnswer(rest, Acceptor(), Fill(0xc), Fill(0xa), 2);
      break;
  }
  return 0;
}
