#include "worker/chief/tfrecord.h"

#include <string>
#include <vector>

#include "common/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::chief {
namespace {

using ::testing::HasSubstr;

uint32_t Le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

TEST(TfRecordTest, FramingMatchesTheFormat) {
  const std::string data = "hello event";
  const std::string rec = EncodeTfRecord(data);
  ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(rec.substr(0, 8), std::string("\x0b\0\0\0\0\0\0\0", 8));  // little-endian length
  EXPECT_EQ(Le32(rec, 8), MaskCrc32c(Crc32c(rec.data(), 8)));
  EXPECT_EQ(rec.substr(12, data.size()), data);
  EXPECT_EQ(Le32(rec, 12 + data.size()), MaskCrc32c(Crc32c(data)));
}

TEST(TfRecordTest, ReadsBackEveryRecordThenOutOfRange) {
  std::vector<std::string> records = {"", "a", std::string(70000, 'q'), std::string("\0\1\2", 3)};
  std::string file;
  for (const std::string& r : records) file += EncodeTfRecord(r);
  TfRecordReader reader(file, "mem");
  for (const std::string& r : records) {
    absl::StatusOr<std::string> got = reader.Next();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, r);
  }
  EXPECT_EQ(reader.offset(), file.size());
  EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(TfRecordTest, EveryCorruptedByteIsDetected) {
  const std::string file = EncodeTfRecord("first record") + EncodeTfRecord("second one");
  for (size_t i = 0; i < file.size(); ++i) {
    std::string bad = file;
    bad[i] ^= 0x20;
    TfRecordReader reader(bad, "mem");
    absl::Status status;
    while (status.ok()) status = reader.Next().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
}

TEST(TfRecordTest, TruncationIsDataLossNamingTheOffset) {
  const std::string first = EncodeTfRecord("first");
  const std::string file = first + EncodeTfRecord("second");
  for (size_t cut : {first.size() + 3, first.size() + 14, file.size() - 1}) {
    TfRecordReader reader(file.substr(0, cut), "events.x");
    ASSERT_TRUE(reader.Next().ok());
    absl::Status status = reader.Next().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("events.x"));
    EXPECT_THAT(status.message(), HasSubstr("offset " + std::to_string(first.size())));
  }
}

}  // namespace
}  // namespace lockstep::chief
