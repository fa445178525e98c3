#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/csv_reader.h"
#include "data/record_reader.h"
#include "gtest/gtest.h"

namespace lockstep::data {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/readers_test_" + name;
}

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = TempPath(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(content.data(), 1, content.size(), f);
  std::fclose(f);
  return path;
}

std::vector<Element> ReadAllFrom(Iterator* it, absl::Status* status) {
  std::vector<Element> out;
  while (true) {
    Element e;
    absl::StatusOr<bool> more = it->Next(&e);
    if (!more.ok()) {
      *status = more.status();
      return out;
    }
    if (!*more) return out;
    out.push_back(e);
  }
}

TEST(CsvReader, ReadsFilesInOrderWithHeaderAndLabelColumn) {
  std::string a = WriteFile("a.csv", "label,x,y\n1,0.5,2\n0,-1,3e1\n");
  std::string b = WriteFile("b.csv", "label,x,y\r\n2,7,8\r\n\n");
  CsvOptions options;
  options.header = true;
  options.label_column = 0;
  CsvReader reader({a, b}, options);
  absl::Status status;
  std::vector<Element> rows = ReadAllFrom(&reader, &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].features.ToVector<float>(), (std::vector<float>{-1, 30}));
  EXPECT_EQ(rows[1].labels.data<int64_t>()[0], 0);
  EXPECT_EQ(rows[2].labels.data<int64_t>()[0], 2);
  EXPECT_EQ(rows[2].features.shape(), (engine::Shape{2}));
}

TEST(CsvReader, ReadsGzipAndShapesFeatures) {
  std::string path = TempPath("c.csv.gz");
  gzFile gz = gzopen(path.c_str(), "wb");
  gzputs(gz, "1,2,3,4,9\n5,6,7,8,3\n");
  gzclose(gz);
  CsvOptions options;
  options.feature_shape = engine::Shape{2, 2, 1};
  CsvReader reader({path}, options);
  absl::Status status;
  std::vector<Element> rows = ReadAllFrom(&reader, &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].features.shape(), (engine::Shape{2, 2, 1}));
  EXPECT_EQ(rows[1].labels.data<int64_t>()[0], 3);
}

TEST(CsvReader, ErrorsNameFileAndLine) {
  std::string bad = WriteFile("bad.csv", "1,2,3\n4,x5,6\n");
  CsvReader reader({bad}, {});
  absl::Status status;
  EXPECT_EQ(ReadAllFrom(&reader, &status).size(), 1u);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(bad + ":2: field 2 (2 bytes) is not a number"), std::string::npos)
      << status;
  // The file's text never reaches the error (a job's reason is readable by every viewer).
  std::string secret = WriteFile("secret.csv", "1,2,3\n4,hunter2-token,6\n");
  CsvReader leaky({secret}, {});
  ReadAllFrom(&leaky, &status);
  EXPECT_EQ(status.message().find("hunter2"), std::string::npos) << status;

  std::string ragged = WriteFile("ragged.csv", "1,2,3\n4,5\n");
  CsvReader r2({ragged}, {});
  ReadAllFrom(&r2, &status);
  EXPECT_NE(status.message().find(":2: 2 fields, expected 3"), std::string::npos) << status;

  std::string fractional = WriteFile("frac.csv", "1,2,3.5\n");
  CsvReader r3({fractional}, {});
  ReadAllFrom(&r3, &status);
  EXPECT_NE(status.message().find("not an integer class id"), std::string::npos) << status;

  // Labels no int64 holds are refused like fractional ones (no undefined conversion).
  for (const char* label : {"1e300", "-9.3e18", "9223372036854775808", "nan", "inf"}) {
    std::string huge = WriteFile("huge.csv", absl::StrCat("1,2,", label, "\n"));
    CsvReader r({huge}, {});
    ReadAllFrom(&r, &status);
    EXPECT_NE(status.message().find("not an integer class id"), std::string::npos) << status;
  }

  CsvReader r4({TempPath("missing.csv")}, {});
  ReadAllFrom(&r4, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(FixedRecordReader, ReadsRecords) {
  // 2-byte header, records of [label u8][3 features u8].
  std::string path = WriteFile("r.bin", std::string("HH\x01\x0a\x0b\x0c\x07\x00\x01\x02", 10));
  RecordOptions o;
  o.header_bytes = 2;
  o.record_bytes = 4;
  o.num_features = 3;
  FixedRecordReader reader({path}, o);
  absl::Status status;
  std::vector<Element> rows = ReadAllFrom(&reader, &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].features.ToVector<float>(), (std::vector<float>{10, 11, 12}));
  EXPECT_EQ(rows[1].labels.data<int64_t>()[0], 7);

  std::string torn = WriteFile("torn.bin", "HH\x01\x02\x03");
  FixedRecordReader r2({torn}, o);
  ReadAllFrom(&r2, &status);
  EXPECT_NE(status.message().find("not a 2-byte header plus whole 4-byte records"),
            std::string::npos)
      << status;
  o.num_features = 4;
  EXPECT_EQ(FixedRecordReader::Validate(o).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::data
