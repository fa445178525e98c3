#include "common/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

struct Vector {
  std::string data;
  uint32_t crc;
};

std::vector<Vector> KnownVectors() {
  std::vector<Vector> v;
  v.push_back({"", 0x00000000u});
  v.push_back({"a", 0xC1D04330u});
  v.push_back({"123456789", 0xE3069283u});
  // RFC 3720 (iSCSI), appendix B.4.
  v.push_back({std::string(32, '\0'), 0x8A9136AAu});
  v.push_back({std::string(32, '\xff'), 0x62A8AB43u});
  std::string inc, dec;
  for (int i = 0; i < 32; ++i) {
    inc.push_back(static_cast<char>(i));
    dec.push_back(static_cast<char>(31 - i));
  }
  v.push_back({inc, 0x46DD794Eu});
  v.push_back({dec, 0x113FDB5Cu});
  // An iSCSI SCSI Read (10) command PDU, also from RFC 3720 B.4.
  const uint8_t pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                           0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  v.push_back({std::string(reinterpret_cast<const char*>(pdu), sizeof(pdu)), 0xD9963A56u});
  return v;
}

TEST(Crc32cTest, KnownVectors) {
  for (const Vector& v : KnownVectors()) {
    EXPECT_EQ(Crc32c(v.data), v.crc) << "size " << v.data.size();
    EXPECT_EQ(Crc32cExtendPortable(0, v.data.data(), v.data.size()), v.crc)
        << "size " << v.data.size();
  }
}

TEST(Crc32cTest, HardwareMatchesPortableAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string buf(1100, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 1091}) {
      EXPECT_EQ(Crc32cExtend(0, buf.data() + offset, n),
                Crc32cExtendPortable(0, buf.data() + offset, n))
          << "offset " << offset << " n " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsConcatenation) {
  std::string a = "hello, ", b = "lockstep world";
  uint32_t whole = Crc32c(a + b);
  EXPECT_EQ(Crc32cExtend(Crc32c(a), b.data(), b.size()), whole);
  EXPECT_EQ(Crc32cExtendPortable(Crc32cExtendPortable(0, a.data(), a.size()), b.data(), b.size()),
            whole);
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTfRecord) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x12345678u}) {
    uint32_t masked = MaskCrc32c(crc);
    EXPECT_NE(masked, crc);
    EXPECT_EQ(UnmaskCrc32c(masked), crc);
  }
  // "123456789" -> 0xE3069283, masked with ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  EXPECT_EQ(MaskCrc32c(Crc32c("123456789")), 0xC78AB0E5u);
}

}  // namespace
}  // namespace lockstep
