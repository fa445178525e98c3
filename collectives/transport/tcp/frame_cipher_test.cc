#include "collectives/transport/tcp/frame_cipher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr size_t kTag = FrameCipher::kTagBytes;

HandshakeNonces Nonces(unsigned char a, unsigned char c) {
  HandshakeNonces n;
  n.acceptor.fill(a);
  n.connector.fill(c);
  return n;
}

// The two ends of the connection rank 1 opened to rank 0.
struct Ends {
  std::unique_ptr<FrameCipher> sender, receiver;
};
Ends MakeEnds(const HandshakeIdentity& me, const HandshakeNonces& nonces) {
  auto s = FrameCipher::Create(me, nonces, 1, 0);
  auto r = FrameCipher::Create(me, nonces, 1, 0);
  EXPECT_TRUE(s.ok() && r.ok());
  return {std::move(*s), std::move(*r)};
}

std::vector<unsigned char> Seal(FrameCipher& c, const std::string& plain) {
  std::vector<unsigned char> frame(plain.size() + kTag);
  PieceCursor cursor(plain.data(), plain.size(), {});
  EXPECT_TRUE(c.Seal(cursor, plain.size(), frame.data()).ok());
  return frame;
}

bool Open(FrameCipher& c, const std::vector<unsigned char>& frame, std::string* plain) {
  plain->assign(frame.size() - kTag, '\0');
  PieceCursor cursor(plain->data(), plain->size(), {});
  return c.Open(frame.data(), plain->size(), cursor);
}

const HandshakeIdentity kMe{"job-secret", "jobs/j/1/strategy/workers", 0, 2, true};

TEST(FrameCipherTest, FramesRoundTripInOrderAndHideThePlaintext) {
  Ends ends = MakeEnds(kMe, Nonces(1, 2));
  for (const std::string& text :
       {std::string("gradients"), std::string(70000, 'x'), std::string()}) {
    std::vector<unsigned char> frame = Seal(*ends.sender, text);
    if (!text.empty()) {
      EXPECT_EQ(std::string(frame.begin(), frame.begin() + text.size()).find("gradients"),
                std::string::npos);
    }
    std::string back;
    ASSERT_TRUE(Open(*ends.receiver, frame, &back));
    EXPECT_EQ(back, text);
  }
}

TEST(FrameCipherTest, ScatteredPiecesSealAsTheirConcatenation) {
  Ends ends = MakeEnds(kMe, Nonces(1, 2));
  std::string a = "first piece|", b = "second piece";
  const BufferPiece pieces[] = {{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()}};
  std::vector<unsigned char> frame(a.size() + b.size() + kTag);
  PieceCursor gather(nullptr, a.size() + b.size(), pieces);
  ASSERT_TRUE(ends.sender->Seal(gather, a.size() + b.size(), frame.data()).ok());
  std::string x(5, '\0'), y(a.size() + b.size() - 5, '\0');
  const BufferPiece out[] = {{x.data(), x.size()}, {y.data(), y.size()}};
  PieceCursor scatter(nullptr, x.size() + y.size(), out);
  ASSERT_TRUE(ends.receiver->Open(frame.data(), x.size() + y.size(), scatter));
  EXPECT_EQ(x + y, a + b);
}

TEST(FrameCipherTest, AChangedByteOrTagFailsTheFrame) {
  for (size_t at : {size_t{0}, size_t{99}, size_t{100}, size_t{100 + kTag - 1}}) {
    Ends ends = MakeEnds(kMe, Nonces(1, 2));
    std::vector<unsigned char> frame = Seal(*ends.sender, std::string(100, 'g'));
    frame[at] ^= 0x01;
    std::string back;
    EXPECT_FALSE(Open(*ends.receiver, frame, &back)) << "byte " << at;
  }
}

TEST(FrameCipherTest, AReplayedOrDroppedFrameFails) {
  Ends ends = MakeEnds(kMe, Nonces(1, 2));
  std::vector<unsigned char> first = Seal(*ends.sender, "step 1");
  std::vector<unsigned char> second = Seal(*ends.sender, "step 2");
  std::string back;
  ASSERT_TRUE(Open(*ends.receiver, first, &back));
  EXPECT_FALSE(Open(*ends.receiver, first, &back));  // replayed: the counter moved on

  Ends fresh = MakeEnds(kMe, Nonces(1, 2));
  first = Seal(*fresh.sender, "step 1");
  second = Seal(*fresh.sender, "step 2");
  EXPECT_FALSE(Open(*fresh.receiver, second, &back));  // the first was dropped
}

TEST(FrameCipherTest, KeysDifferPerConnectionSecretAndGroup) {
  Ends ends = MakeEnds(kMe, Nonces(1, 2));
  const std::vector<unsigned char> frame = Seal(*ends.sender, "weights");
  std::string back;
  auto other_nonces = FrameCipher::Create(kMe, Nonces(1, 3), 1, 0);
  EXPECT_FALSE(Open(**other_nonces, frame, &back));
  auto other_direction = FrameCipher::Create(kMe, Nonces(1, 2), 0, 1);
  EXPECT_FALSE(Open(**other_direction, frame, &back));
  HandshakeIdentity wrong = kMe;
  wrong.secret = "another-secret";
  auto other_secret = FrameCipher::Create(wrong, Nonces(1, 2), 1, 0);
  EXPECT_FALSE(Open(**other_secret, frame, &back));
  HandshakeIdentity elsewhere = kMe;
  elsewhere.group = "jobs/j/2/strategy/workers";
  auto other_group = FrameCipher::Create(elsewhere, Nonces(1, 2), 1, 0);
  EXPECT_FALSE(Open(**other_group, frame, &back));
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
