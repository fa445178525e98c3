#include "data/example_reader.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/dataset.h"
#include "data/split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = ExampleFeature::Kind;

// The files write_examples.py wrote (once per test binary) into the test's temp dir.
const std::string& Dir() {
  static const std::string* const dir = [] {
    auto* d = new std::string(absl::StrCat(std::getenv("TEST_TMPDIR"), "/examples"));
    const std::string cmd =
        absl::StrCat("mkdir -p ", *d, " && python3 data/testdata/write_examples.py ", *d);
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return d;
  }();
  return *dir;
}

std::string File(const std::string& name) { return Dir() + "/" + name; }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WriteBytes(const std::string& name, const std::string& bytes) {
  const std::string path = File(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// pixels [4] FLOAT and ids [2] INT64 as the input, label INT64.
ExampleOptions PixelsAndIds() {
  ExampleOptions o;
  o.features = {{"pixels", engine::Shape{4}, Kind::kFloat},
                {"ids", engine::Shape{2}, Kind::kInt64}};
  o.label = {"label", engine::Shape{}, Kind::kInt64};
  return o;
}

// Every element of `files`, or the first error.
absl::StatusOr<std::vector<Element>> ReadExamples(std::vector<std::string> files,
                                                  ExampleOptions o) {
  ExampleReader reader(std::move(files), std::move(o));
  std::vector<Element> all;
  while (true) {
    Element e;
    absl::StatusOr<bool> more = reader.Next(&e);
    if (!more.ok()) return more.status();
    if (!*more) return all;
    all.push_back(std::move(e));
  }
}

// Byte offsets of the records of a well-formed file.
std::vector<uint64_t> RecordOffsets(const std::string& path) {
  absl::StatusOr<TfRecordReader> reader = TfRecordReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<uint64_t> offsets;
  while (true) {
    const uint64_t at = reader->offset();
    if (!reader->Next().ok()) return offsets;
    offsets.push_back(at);
  }
}

TEST(ExampleReaderTest, ReadsWhatAnIndependentWriterWrote) {
  absl::StatusOr<std::vector<Element>> all =
      ReadExamples({File("good-0.tfrecord"), File("good-1.tfrecord")}, PixelsAndIds());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const Element& e = (*all)[i];
    ASSERT_EQ(e.features.shape(), (engine::Shape{6}));
    const float* f = e.features.data<float>();
    const std::vector<float> want = {i + 0.5f, i + 1.5f, i + 2.5f, i + 3.5f, float(i), float(-i)};
    EXPECT_EQ(std::vector<float>(f, f + 6), want) << "example " << i;
    ASSERT_EQ(e.labels.dtype(), DType::kI64);
    EXPECT_EQ(e.labels.data<int64_t>()[0], i % 3) << "example " << i;
  }
}

TEST(ExampleReaderTest, OneFeatureKeepsItsShapeAndAFloatLabelIsATarget) {
  ExampleOptions o;
  o.features = {{"pixels", engine::Shape{2, 2}, Kind::kFloat}};
  o.label = {"target", engine::Shape{1}, Kind::kFloat};
  absl::StatusOr<std::vector<Element>> all = ReadExamples({File("good-1.tfrecord")}, o);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].features.shape(), (engine::Shape{2, 2}));
  EXPECT_EQ((*all)[0].features.data<float>()[3], 8.5f);
  ASSERT_EQ((*all)[2].labels.dtype(), DType::kF32);
  EXPECT_EQ((*all)[2].labels.data<float>()[0], 7 * 0.25f);
}

// A label of several values is a tensor of its shape (a class id per position of a
// sequence); batches stack it to [batch, ...]. A record with another count is refused.
TEST(ExampleReaderTest, AVectorLabelIsATensorOfItsShape) {
  ExampleOptions o;
  o.features = {{"pixels", engine::Shape{4}, Kind::kFloat}};
  o.label = {"ids", engine::Shape{2}, Kind::kInt64};
  absl::StatusOr<Element> all = ReadAll(Dataset::TfRecord({File("good-0.tfrecord")}, o));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->labels.dtype(), DType::kI64);
  ASSERT_EQ(all->labels.shape(), (engine::Shape{5, 2}));
  EXPECT_EQ(all->labels.data<int64_t>()[6], 3);
  EXPECT_EQ(all->labels.data<int64_t>()[7], -3);
  o.label.shape = engine::Shape{3};
  EXPECT_THAT(ReadExamples({File("good-0.tfrecord")}, o).status().message(),
              HasSubstr("feature 'ids' has 2 values, expected 3"));
}

// The Dataset source: FILE sharding gives a shard whole files, and a data position is
// resumed by skipping records.
TEST(ExampleReaderTest, DatasetShardsByFileAndResumesAPosition) {
  const Dataset ds =
      Dataset::TfRecord({File("good-0.tfrecord"), File("good-1.tfrecord")}, PixelsAndIds());
  ASSERT_TRUE(ds.status().ok()) << ds.status();
  EXPECT_EQ(ds.num_files(), 2);
  absl::StatusOr<Element> shard = ReadAll(ds.ShardFiles(2, 1));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_EQ(shard->features.shape(), (engine::Shape{3, 6}));
  std::vector<float> firsts;
  for (int i = 0; i < 3; ++i) firsts.push_back(shard->features.data<float>()[i * 6]);
  EXPECT_EQ(firsts, (std::vector<float>{5.5f, 6.5f, 7.5f}));
  auto resumed = ds.Batch(2, /*drop_remainder=*/false).MakeIterator(3);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  Element e;
  absl::StatusOr<bool> more = (*resumed)->Next(&e);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(e.features.data<float>()[0], 6.5f) << "batch 3 starts with example 6";
}

TEST(ExampleReaderTest, BadExamplesNameTheFileRecordAndFeature) {
  const std::vector<uint64_t> offsets = RecordOffsets(File("length.tfrecord"));
  ASSERT_EQ(offsets.size(), 3u);
  const struct {
    std::string file;
    std::vector<std::string> parts;
  } cases[] = {
      {"missing.tfrecord", {": record 1 (offset ", "no feature 'pixels'"}},
      {"kind.tfrecord",
       {": record 1 (offset ", "feature 'pixels' holds an int64_list, expected a float_list"}},
      {"length.tfrecord",
       {absl::StrCat(": record 2 (offset ", offsets[2], ")"),
        "feature 'pixels' has 3 values, expected 4 (shape [4])"}},
      {"garbage.tfrecord", {": record 1 (offset ", "not a tf.train.Example"}},
  };
  for (const auto& c : cases) {
    ExampleReader reader({File(c.file)}, PixelsAndIds());
    Element e;
    absl::StatusOr<bool> more;
    while ((more = reader.Next(&e)).ok() && *more) {
    }
    EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument) << c.file;
    EXPECT_THAT(more.status().message(), HasSubstr(File(c.file))) << c.file;
    for (const std::string& part : c.parts) {
      EXPECT_THAT(more.status().message(), HasSubstr(part)) << c.file;
    }
    EXPECT_EQ(reader.Next(&e).status(), more.status()) << "the error stays";
  }
}

// Truncated anywhere in a record (header, data, footer) or with any byte of a record
// flipped, a file is refused with DATA_LOSS naming it and that record's offset; the
// records before it were read. The message never quotes the file's bytes.
TEST(ExampleReaderTest, TruncatedAndCorruptedFilesAreRefusedWithFileAndOffset) {
  const std::string good = ReadBytes(File("good-0.tfrecord"));
  const std::vector<uint64_t> offsets = RecordOffsets(File("good-0.tfrecord"));
  ASSERT_EQ(offsets.size(), 5u);
  const uint64_t bad = offsets[3];  // record 3: the fourth example
  const uint64_t end = offsets[4];
  struct Case {
    std::string name;
    std::string bytes;
    std::string what;
  };
  std::vector<Case> cases = {
      {"cut-header.tfrecord", good.substr(0, bad + 5), "truncated header"},
      {"cut-data.tfrecord", good.substr(0, bad + 20), "truncated data"},
      {"cut-footer.tfrecord", good.substr(0, end - 2), "truncated footer"},
  };
  for (uint64_t at = bad; at < end; ++at) {
    std::string flipped = good;
    flipped[at] ^= 0x10;
    cases.push_back({absl::StrCat("flip-", at, ".tfrecord"), flipped,
                     at < bad + 12 ? "length CRC mismatch" : "data CRC mismatch"});
  }
  for (const Case& c : cases) {
    const std::string path = WriteBytes(c.name, c.bytes);
    ExampleReader reader({path}, PixelsAndIds());
    Element e;
    int read = 0;
    absl::StatusOr<bool> more;
    while ((more = reader.Next(&e)).ok() && *more) ++read;
    EXPECT_EQ(read, 3) << c.name;
    EXPECT_EQ(more.status().code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(more.status().message(),
                HasSubstr(absl::StrCat(path, ": TFRecord at offset ", bad, ": ")))
        << c.name;
    EXPECT_THAT(more.status().message(), HasSubstr(c.what)) << c.name;
    EXPECT_THAT(more.status().message(), Not(HasSubstr("ex3"))) << c.name;
  }
}

TEST(ExampleReaderTest, BadOptionsAndMissingFilesAreRefused) {
  auto refused = [](ExampleOptions o) {
    return Dataset::TfRecord({File("good-0.tfrecord")}, std::move(o)).status();
  };
  ExampleOptions o = PixelsAndIds();
  o.features.clear();
  EXPECT_THAT(refused(o).message(), HasSubstr("no input features"));
  o = PixelsAndIds();
  o.features[1].name.clear();
  EXPECT_THAT(refused(o).message(), HasSubstr("features[1]: no name"));
  o = PixelsAndIds();
  o.features[0].shape = engine::Shape{4, 0};
  EXPECT_THAT(refused(o).message(), HasSubstr("features[0] 'pixels': shape [4,0]"));
  o = PixelsAndIds();
  o.label.shape = engine::Shape{0};
  EXPECT_THAT(refused(o).message(), HasSubstr("label 'label': shape [0] has a dimension < 1"));
  EXPECT_TRUE(absl::IsInvalidArgument(Dataset::TfRecord({}, PixelsAndIds()).status()));

  absl::StatusOr<std::vector<Element>> missing =
      ReadExamples({File("good-0.tfrecord"), File("nope.tfrecord")}, PixelsAndIds());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(File("nope.tfrecord")));
}

}  // namespace
}  // namespace lockstep::data
