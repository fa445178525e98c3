#include "collectives/transport/tcp/tcp_handshake.h"

#include <cstring>

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

HandshakeNonce Nonce(unsigned char fill) {
  HandshakeNonce n;
  n.fill(fill);
  return n;
}

const HandshakeIdentity kAcceptor{"secret", "jobs/j1/0", 0, 3};
const HandshakeIdentity kConnector{"secret", "jobs/j1/0", 2, 3};

TEST(TcpHandshakeTest, HelloRoundTrips) {
  const std::string hello = EncodeHello(Nonce(7));
  ASSERT_EQ(hello.size(), kHelloBytes);
  uint64_t magic;
  std::memcpy(&magic, hello.data(), sizeof(magic));
  EXPECT_EQ(magic, kHandshakeMagic);
  absl::StatusOr<HandshakeNonce> nonce = ParseHello(hello, 1);
  ASSERT_TRUE(nonce.ok()) << nonce.status();
  EXPECT_EQ(*nonce, Nonce(7));
}

TEST(TcpHandshakeTest, HelloWithWrongMagicOrVersionIsRefused) {
  std::string hello = EncodeHello(Nonce(7));
  hello[0] ^= 1;
  absl::Status s = ParseHello(hello, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
  hello = EncodeHello(Nonce(7));
  hello[8] = 2;  // version
  EXPECT_EQ(ParseHello(hello, 1).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TcpHandshakeTest, MessagesOfTheWrongSizeAreRefused) {
  const std::string hello = EncodeHello(Nonce(7));
  EXPECT_EQ(ParseHello(hello.substr(1), 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHello("", 1).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string proof = EncodeProof(kConnector, Nonce(1), Nonce(2));
  EXPECT_EQ(CheckProof(proof + "x", kAcceptor, Nonce(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string answer = EncodeAnswer(kAcceptor, Nonce(2), Nonce(1));
  EXPECT_EQ(CheckAnswer(answer.substr(0, 31), kConnector, Nonce(2), Nonce(1), 0).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TcpHandshakeTest, ProofOfTheGroupSecretGivesTheConnectorsRank) {
  const std::string proof = EncodeProof(kConnector, Nonce(1), Nonce(2));
  ASSERT_EQ(proof.size(), kProofBytes);
  absl::StatusOr<ProvenPeer> peer = CheckProof(proof, kAcceptor, Nonce(1));
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->rank, 2);
  EXPECT_EQ(peer->nonce_c, Nonce(2));
}

TEST(TcpHandshakeTest, ProofWithWrongSecretGroupNonceOrMagicIsRefused) {
  const HandshakeIdentity wrong_secret{"other", kConnector.group, 2, 3};
  const HandshakeIdentity other_group{kConnector.secret, "jobs/j2/0", 2, 3};
  for (const HandshakeIdentity& c : {wrong_secret, other_group}) {
    EXPECT_EQ(CheckProof(EncodeProof(c, Nonce(1), Nonce(2)), kAcceptor, Nonce(1)).status().code(),
              absl::StatusCode::kUnauthenticated);
  }
  // A proof made for another hello (a replayed one).
  EXPECT_EQ(
      CheckProof(EncodeProof(kConnector, Nonce(9), Nonce(2)), kAcceptor, Nonce(1)).status().code(),
      absl::StatusCode::kUnauthenticated);
  std::string proof = EncodeProof(kConnector, Nonce(1), Nonce(2));
  proof[7] ^= 0x80;
  EXPECT_EQ(CheckProof(proof, kAcceptor, Nonce(1)).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TcpHandshakeTest, ProvenRankOutsideTheGroupIsRefused) {
  for (const HandshakeIdentity& c : {HandshakeIdentity{"secret", kAcceptor.group, 3, 3},
                                     HandshakeIdentity{"secret", kAcceptor.group, -1, 3},
                                     HandshakeIdentity{"secret", kAcceptor.group, 1, 4}}) {
    absl::Status s = CheckProof(EncodeProof(c, Nonce(1), Nonce(2)), kAcceptor, Nonce(1)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.rank << " of " << c.world_size;
    EXPECT_NE(s.message().find("this group has 3 ranks"), std::string::npos) << s;
  }
}

TEST(TcpHandshakeTest, AnswerProvesTheAcceptor) {
  const std::string answer = EncodeAnswer(kAcceptor, Nonce(2), Nonce(1));
  ASSERT_EQ(answer.size(), kAnswerBytes);
  EXPECT_TRUE(CheckAnswer(answer, kConnector, Nonce(2), Nonce(1), 0).ok());
  // Another rank's answer, or an answer over other nonces, proves nothing.
  EXPECT_EQ(CheckAnswer(answer, kConnector, Nonce(2), Nonce(1), 1).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckAnswer(answer, kConnector, Nonce(1), Nonce(2), 0).code(),
            absl::StatusCode::kUnauthenticated);
  const HandshakeIdentity wrong_secret{"other", kConnector.group, 2, 3};
  EXPECT_EQ(CheckAnswer(answer, wrong_secret, Nonce(2), Nonce(1), 0).code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
