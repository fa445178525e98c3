#include "common/secure_random.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(SecureRandomTest, HexHasTwoDigitsPerByteAndDiffersEachCall) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    const std::string s = SecureRandomHex(32);
    ASSERT_EQ(s.size(), 64u);
    EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos) << s;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 64u);  // a collision of 256-bit values means a broken generator
}

TEST(SecureRandomTest, FillsLargeBuffersWhole) {
  // getrandom may return fewer bytes than asked for large requests; every byte is filled.
  std::string a(1 << 20, '\0'), b(1 << 20, '\0');
  SecureRandomBytes(a.data(), a.size());
  SecureRandomBytes(b.data(), b.size());
  EXPECT_NE(a, b);
  // The last 4 KiB are not left zero (a short read would leave them so).
  EXPECT_NE(a.substr(a.size() - 4096), std::string(4096, '\0'));
}

TEST(SecureRandomTest, Uint64Varies) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(SecureRandomUint64());
  EXPECT_EQ(seen.size(), 64u);
}

}  // namespace
}  // namespace lockstep
