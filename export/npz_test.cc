#include "export/npz.h"

#include <zlib.h>

#include <cstring>

#include "export/test_tensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::exporting {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

uint32_t U32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}
uint32_t U16(const std::string& s, size_t at) {
  return static_cast<uint8_t>(s[at]) | (static_cast<uint8_t>(s[at + 1]) << 8);
}

TEST(Npy, HeaderIsVersionOneAlignedTo64) {
  auto npy = EncodeNpy(TestTensor("dense/kernel", v1::F32, {2, 3}, 24));
  ASSERT_TRUE(npy.ok()) << npy.status();
  EXPECT_EQ(npy->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const uint32_t n = U16(*npy, 8);
  EXPECT_EQ((10 + n) % 64, 0u);
  const std::string header = npy->substr(10, n);
  EXPECT_THAT(header, StartsWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(npy->substr(10 + n),
            TestTensor("dense/kernel", v1::F32, {2, 3}, 24).tensor().content());

  EXPECT_THAT(EncodeNpy(TestTensor("b", v1::F64, {5}, 40))->substr(10),
              StartsWith("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"));
  EXPECT_THAT(EncodeNpy(TestTensor("s", v1::I64, {}, 8))->substr(10),
              StartsWith("{'descr': '<i8', 'fortran_order': False, 'shape': (), }"));
  EXPECT_THAT(EncodeNpy(TestTensor("h", v1::F16, {1, 1, 2}, 4))->substr(10),
              StartsWith("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 2), }"));
}

TEST(Npy, Bfloat16IsRefusedNamingTheTensor) {
  absl::Status s = EncodeNpy(TestTensor("dense/kernel", v1::BF16, {2}, 4)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dense/kernel: npz cannot hold BF16"));
}

// Walks the archive as an unzip tool would: the end record, the central directory, and each
// member's local header, CRC and bytes.
TEST(Npz, ArchiveIsAStoredZipOfNpyMembers) {
  Weights w;
  w.tensors.push_back(TestTensor("dense/kernel", v1::F32, {2, 3}, 24));
  w.tensors.push_back(TestTensor("dense/bias", v1::I32, {3}, 12));
  auto zip = EncodeNpz(w);
  ASSERT_TRUE(zip.ok()) << zip.status();
  const size_t end = zip->size() - 22;
  ASSERT_EQ(U32(*zip, end), 0x06054b50u);
  EXPECT_EQ(U16(*zip, end + 10), 2u);
  size_t entry = U32(*zip, end + 16);
  EXPECT_EQ(entry + U32(*zip, end + 12), end) << "the directory ends where the end record starts";
  for (const v1::NamedTensor& t : w.tensors) {
    SCOPED_TRACE(t.name());
    ASSERT_EQ(U32(*zip, entry), 0x02014b50u);
    EXPECT_EQ(U16(*zip, entry + 10), 0u) << "stored";
    const uint32_t name_length = U16(*zip, entry + 28);
    EXPECT_EQ(zip->substr(entry + 46, name_length), t.name() + ".npy");
    const uint32_t size = U32(*zip, entry + 24);
    const uint32_t local = U32(*zip, entry + 42);
    ASSERT_EQ(U32(*zip, local), 0x04034b50u);
    const std::string data = zip->substr(local + 30 + U16(*zip, local + 26), size);
    EXPECT_EQ(data, EncodeNpy(t).value());
    EXPECT_EQ(U32(*zip, entry + 16),
              crc32(0L, reinterpret_cast<const Bytef*>(data.data()), data.size()));
    entry += 46 + name_length;
  }
}

TEST(Npz, RefusesWhatNumPyCannotHoldNamingIt) {
  Weights w;
  w.tensors.push_back(TestTensor("ok", v1::F32, {1}, 4));
  w.tensors.push_back(TestTensor("dense/bias", v1::BF16, {3}, 6));
  EXPECT_THAT(std::string(EncodeNpz(w).status().message()), HasSubstr("dense/bias: npz cannot"));
  w.tensors[1] = TestTensor("ok", v1::F32, {1}, 4);
  EXPECT_THAT(std::string(EncodeNpz(w).status().message()), HasSubstr("ok: the name appears"));
}

}  // namespace
}  // namespace lockstep::exporting
