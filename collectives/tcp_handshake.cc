#include "collectives/tcp_handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/socket_util.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr uint32_t kVersion = 1;
using Nonce = std::array<unsigned char, 32>;
using Mac = std::array<unsigned char, 32>;

struct Hello {
  uint64_t magic;
  uint32_t version;
  uint32_t pad;
  Nonce nonce_a;
};

struct Proof {
  uint64_t magic;
  int32_t rank;
  int32_t world;
  Nonce nonce_c;
  Mac mac;
};

Mac Hmac(const std::string& secret, const std::string& message) {
  Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
  return out;
}

std::string Bytes(const Nonce& n) {
  return std::string(reinterpret_cast<const char*>(n.data()), n.size());
}

Mac ConnectorMac(const HandshakeIdentity& me, const Nonce& a, const Nonce& c, int rank, int world) {
  return Hmac(me.secret,
              absl::StrCat("connect|", me.group, "|", Bytes(a), Bytes(c), "|", rank, "|", world));
}

Mac AcceptorMac(const HandshakeIdentity& me, const Nonce& c, const Nonce& a, int rank) {
  return Hmac(me.secret, absl::StrCat("accept|", me.group, "|", Bytes(c), Bytes(a), "|", rank));
}

bool Equal(const Mac& x, const Mac& y) { return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0; }

absl::Status RandomNonce(Nonce* n) {
  if (RAND_bytes(n->data(), static_cast<int>(n->size())) != 1) {
    return absl::InternalError("RAND_bytes failed");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HandshakeAsConnector(int fd, const HandshakeIdentity& me, int expected_peer,
                                  absl::Time deadline) {
  Hello hello;
  LS_RETURN_IF_ERROR(ReadFull(fd, &hello, sizeof(hello), deadline));
  if (hello.magic != kHandshakeMagic || hello.version != kVersion) {
    return absl::UnauthenticatedError(absl::StrCat("rank ", expected_peer,
                                                   "'s address answered with a wrong magic "
                                                   "number; is it a Lockstep collective port?"));
  }
  Proof proof{};
  proof.magic = kHandshakeMagic;
  proof.rank = me.rank;
  proof.world = me.world_size;
  LS_RETURN_IF_ERROR(RandomNonce(&proof.nonce_c));
  proof.mac = ConnectorMac(me, hello.nonce_a, proof.nonce_c, me.rank, me.world_size);
  LS_RETURN_IF_ERROR(WriteFull(fd, &proof, sizeof(proof), deadline));
  Mac answer;
  absl::Status s = ReadFull(fd, answer.data(), answer.size(), deadline);
  if (!s.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("rank ", expected_peer, " refused the handshake (", s.message(),
                     "); check that every rank has the same group secret"));
  }
  if (!Equal(answer, AcceptorMac(me, proof.nonce_c, hello.nonce_a, expected_peer))) {
    return absl::UnauthenticatedError(absl::StrCat(
        "rank ", expected_peer, " failed to prove the group secret; refusing the connection"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> HandshakeAsAcceptor(int fd, const HandshakeIdentity& me, absl::Time deadline) {
  Hello hello{};
  hello.magic = kHandshakeMagic;
  hello.version = kVersion;
  LS_RETURN_IF_ERROR(RandomNonce(&hello.nonce_a));
  LS_RETURN_IF_ERROR(WriteFull(fd, &hello, sizeof(hello), deadline));
  Proof proof;
  LS_RETURN_IF_ERROR(ReadFull(fd, &proof, sizeof(proof), deadline));
  if (proof.magic != kHandshakeMagic) {
    return absl::UnauthenticatedError("wrong magic number in the connection's handshake");
  }
  if (!Equal(proof.mac, ConnectorMac(me, hello.nonce_a, proof.nonce_c, proof.rank, proof.world))) {
    return absl::UnauthenticatedError(
        absl::StrCat("a connection claiming rank ", proof.rank,
                     " failed to prove the group secret (wrong secret or another group)"));
  }
  if (proof.world != me.world_size || proof.rank < 0 || proof.rank >= me.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("connection claims rank ", proof.rank, " of ",
                                                   proof.world, "; this group has ", me.world_size,
                                                   " ranks"));
  }
  Mac answer = AcceptorMac(me, proof.nonce_c, hello.nonce_a, me.rank);
  LS_RETURN_IF_ERROR(WriteFull(fd, answer.data(), answer.size(), deadline));
  return proof.rank;
}

}  // namespace collectives
}  // namespace lockstep
