#include "collectives/transport/tcp/tcp_handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/transport/tcp/socket_util.h"
#include "common/secure_random.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr uint32_t kVersion = 1;
using Nonce = HandshakeNonce;
using Mac = std::array<unsigned char, 32>;

struct Hello {
  uint64_t magic;
  uint32_t version;
  uint32_t pad;
  Nonce nonce_a;
};
static_assert(sizeof(Hello) == kHelloBytes, "the hello's wire size");

struct Proof {
  uint64_t magic;
  int32_t rank;
  int32_t world;
  Nonce nonce_c;
  Mac mac;
};
static_assert(sizeof(Proof) == kProofBytes, "the proof's wire size");
static_assert(sizeof(Mac) == kAnswerBytes, "the answer's wire size");

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

// The proofs cover the encryption mode: ranks that disagree on it refuse each other.
const char* Mode(const HandshakeIdentity& me) { return me.encrypt ? "|aes-256-gcm" : ""; }

Mac ConnectorMac(const HandshakeIdentity& me, const Nonce& a, const Nonce& c, int rank, int world) {
  return Hmac(me.secret, absl::StrCat("connect|", me.group, "|", Bytes(a), Bytes(c), "|", rank, "|",
                                      world, Mode(me)));
}

Mac AcceptorMac(const HandshakeIdentity& me, const Nonce& c, const Nonce& a, int rank) {
  return Hmac(me.secret,
              absl::StrCat("accept|", me.group, "|", Bytes(c), Bytes(a), "|", rank, Mode(me)));
}

bool Equal(const Mac& x, const Mac& y) { return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0; }

absl::Status RandomNonce(Nonce* n) {
  SecureRandomBytes(n->data(), n->size());
  return absl::OkStatus();
}

template <typename T>
std::string ToBytes(const T& message) {
  return std::string(reinterpret_cast<const char*>(&message), sizeof(message));
}

// `bytes` as a T; INVALID_ARGUMENT naming `what` when the size is not T's.
template <typename T>
absl::StatusOr<T> FromBytes(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() != sizeof(T)) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake ", what, " of ", bytes.size(), " bytes; it has ", sizeof(T)));
  }
  T message;
  std::memcpy(&message, bytes.data(), sizeof(T));
  return message;
}

}  // namespace

std::string EncodeHello(const HandshakeNonce& nonce_a) {
  Hello hello{};
  hello.magic = kHandshakeMagic;
  hello.version = kVersion;
  hello.nonce_a = nonce_a;
  return ToBytes(hello);
}

absl::StatusOr<HandshakeNonce> ParseHello(absl::string_view bytes, int expected_peer) {
  LS_ASSIGN_OR_RETURN(Hello hello, FromBytes<Hello>(bytes, "hello"));
  if (hello.magic != kHandshakeMagic || hello.version != kVersion) {
    return absl::UnauthenticatedError(absl::StrCat("rank ", expected_peer,
                                                   "'s address answered with a wrong magic "
                                                   "number; is it a Lockstep collective port?"));
  }
  return hello.nonce_a;
}

std::string EncodeProof(const HandshakeIdentity& me, const HandshakeNonce& nonce_a,
                        const HandshakeNonce& nonce_c) {
  Proof proof{};
  proof.magic = kHandshakeMagic;
  proof.rank = me.rank;
  proof.world = me.world_size;
  proof.nonce_c = nonce_c;
  proof.mac = ConnectorMac(me, nonce_a, nonce_c, me.rank, me.world_size);
  return ToBytes(proof);
}

absl::StatusOr<ProvenPeer> CheckProof(absl::string_view bytes, const HandshakeIdentity& me,
                                      const HandshakeNonce& nonce_a) {
  LS_ASSIGN_OR_RETURN(Proof proof, FromBytes<Proof>(bytes, "proof"));
  if (proof.magic != kHandshakeMagic) {
    return absl::UnauthenticatedError("wrong magic number in the connection's handshake");
  }
  if (!Equal(proof.mac, ConnectorMac(me, nonce_a, proof.nonce_c, proof.rank, proof.world))) {
    return absl::UnauthenticatedError(
        absl::StrCat("a connection claiming rank ", proof.rank,
                     " failed to prove the group secret (wrong secret, another group, or another "
                     "communication.encrypt setting)"));
  }
  if (proof.world != me.world_size || proof.rank < 0 || proof.rank >= me.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("connection claims rank ", proof.rank, " of ",
                                                   proof.world, "; this group has ", me.world_size,
                                                   " ranks"));
  }
  return ProvenPeer{proof.rank, proof.nonce_c};
}

std::string EncodeAnswer(const HandshakeIdentity& me, const HandshakeNonce& nonce_c,
                         const HandshakeNonce& nonce_a) {
  return ToBytes(AcceptorMac(me, nonce_c, nonce_a, me.rank));
}

absl::Status CheckAnswer(absl::string_view bytes, const HandshakeIdentity& me,
                         const HandshakeNonce& nonce_c, const HandshakeNonce& nonce_a,
                         int expected_peer) {
  absl::StatusOr<Mac> answer = FromBytes<Mac>(bytes, "answer");
  if (!answer.ok() || !Equal(*answer, AcceptorMac(me, nonce_c, nonce_a, expected_peer))) {
    return absl::UnauthenticatedError(absl::StrCat(
        "rank ", expected_peer,
        " failed to prove the group secret (or has another communication.encrypt setting); "
        "refusing the connection"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HandshakeNonces> HandshakeAsConnector(int fd, const HandshakeIdentity& me,
                                                     int expected_peer, absl::Time deadline) {
  std::string hello(kHelloBytes, '\0');
  LS_RETURN_IF_ERROR(ReadFull(fd, hello.data(), hello.size(), deadline));
  LS_ASSIGN_OR_RETURN(const Nonce nonce_a, ParseHello(hello, expected_peer));
  Nonce nonce_c;
  LS_RETURN_IF_ERROR(RandomNonce(&nonce_c));
  const std::string proof = EncodeProof(me, nonce_a, nonce_c);
  LS_RETURN_IF_ERROR(WriteFull(fd, proof.data(), proof.size(), deadline));
  std::string answer(kAnswerBytes, '\0');
  absl::Status s = ReadFull(fd, answer.data(), answer.size(), deadline);
  if (!s.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "rank ", expected_peer, " refused the handshake (", s.message(),
        "); check that every rank has the same group secret and communication.encrypt setting"));
  }
  LS_RETURN_IF_ERROR(CheckAnswer(answer, me, nonce_c, nonce_a, expected_peer));
  return HandshakeNonces{nonce_a, nonce_c};
}

}  // namespace collectives
}  // namespace lockstep
