#include "common/tfrecord.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
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
  const std::pair<size_t, const char*> cuts[] = {{first.size() + 3, "truncated header"},
                                                 {first.size() + 14, "truncated data"},
                                                 {file.size() - 1, "truncated footer"}};
  for (const auto& [cut, what] : cuts) {
    TfRecordReader reader(file.substr(0, cut), "events.x");
    ASSERT_TRUE(reader.Next().ok());
    absl::Status status = reader.Next().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("events.x"));
    EXPECT_THAT(status.message(), HasSubstr("offset " + std::to_string(first.size())));
    EXPECT_THAT(status.message(), HasSubstr(what));
    EXPECT_EQ(reader.offset(), first.size()) << "stays at the bad record";
  }
}

// A length whose CRC matches but which runs far past the end is refused before anything
// is allocated for it (a crafted file cannot make the reader allocate 2^60 bytes).
TEST(TfRecordTest, HugeLengthIsRefusedWithoutAllocating) {
  std::string header;
  const uint64_t length = uint64_t{1} << 60;
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<char>(length >> (8 * i)));
  const uint32_t crc = MaskCrc32c(Crc32c(header.data(), 8));
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(crc >> (8 * i)));
  TfRecordReader reader(header + "xxxx", "crafted");
  absl::Status status = reader.Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("crafted: TFRecord at offset 0: truncated data"));
}

// A file is read in chunks: records larger than a chunk and records that straddle chunk
// boundaries come back whole; the offset is the file's byte offset.
TEST(TfRecordTest, ReadsAFileInChunks) {
  std::vector<std::string> records;
  for (int i = 0; i < 40; ++i) records.push_back(std::string(9000 + 7 * i, static_cast<char>(i)));
  records.push_back(std::string(600000, 'z'));  // more than a chunk
  records.push_back("last");
  std::string contents;
  for (const std::string& r : records) contents += EncodeTfRecord(r);
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/chunks.tfrecord";
  std::ofstream(path, std::ios::binary) << contents;
  absl::StatusOr<TfRecordReader> reader = TfRecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const std::string& r : records) {
    absl::StatusOr<std::string> got = reader->Next();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, r);
  }
  EXPECT_EQ(reader->offset(), contents.size());
  EXPECT_EQ(reader->Next().status().code(), absl::StatusCode::kOutOfRange);

  std::ofstream(path, std::ios::binary) << contents.substr(0, contents.size() - 10);
  reader = TfRecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::Status status;
  while (status.ok()) status = reader->Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(path + ": TFRecord at offset "));
  EXPECT_EQ(TfRecordReader::Open(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
