#include "collectives/transport/piece_cursor.h"

#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(PieceCursorTest, GathersAndScattersAcrossPiecesSkippingEmptyOnes) {
  std::string a = "abc", b = "", c = "defgh", d = "";
  std::vector<BufferPiece> pieces = {
      {a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}, {d.data(), 0}};
  PieceCursor out(nullptr, 8, pieces);
  char buf[8];
  out.CopyOut(buf, 2);
  out.CopyOut(buf + 2, 6);
  EXPECT_EQ(std::string(buf, 8), "abcdefgh");
  EXPECT_EQ(out.offset(), 8u);

  std::string x(3, '.'), y(5, '.');
  std::vector<BufferPiece> targets = {{nullptr, 0}, {x.data(), 3}, {y.data(), 5}};
  PieceCursor in(nullptr, 8, targets);
  in.CopyIn("01234", 5);
  in.CopyIn("567", 3);
  EXPECT_EQ(x, "012");
  EXPECT_EQ(y, "34567");
}

TEST(PieceCursorTest, FillsIovecsUpToTheLimitFromTheCursor) {
  std::vector<char> mem(100);
  std::vector<BufferPiece> pieces = {{mem.data(), 10}, {mem.data() + 10, 0}, {mem.data() + 20, 30}};
  PieceCursor c(nullptr, 40, pieces);
  c.Advance(4);
  iovec iov[4];
  ASSERT_EQ(c.Fill(iov, 4, 100), 2);
  EXPECT_EQ(iov[0].iov_base, mem.data() + 4);
  EXPECT_EQ(iov[0].iov_len, 6u);
  EXPECT_EQ(iov[1].iov_base, mem.data() + 20);
  EXPECT_EQ(iov[1].iov_len, 30u);
  ASSERT_EQ(c.Fill(iov, 4, 8), 2);
  EXPECT_EQ(iov[1].iov_len, 2u);
  ASSERT_EQ(c.Fill(iov, 1, 100), 1);
  c.Advance(6);
  ASSERT_EQ(c.Fill(iov, 4, 100), 1);
  EXPECT_EQ(iov[0].iov_base, mem.data() + 20);
  c.Advance(30);
  EXPECT_EQ(c.Fill(iov, 4, 100), 0);
  EXPECT_EQ(c.offset(), 40u);
}

TEST(PieceCursorTest, OneBufferWhenNoPieces) {
  char mem[5] = {1, 2, 3, 4, 5};
  PieceCursor c(mem, 5, {});
  iovec iov[2];
  ASSERT_EQ(c.Fill(iov, 2, 100), 1);
  EXPECT_EQ(iov[0].iov_base, mem);
  EXPECT_EQ(iov[0].iov_len, 5u);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
