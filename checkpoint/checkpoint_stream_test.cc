#include "checkpoint/checkpoint_stream.h"

#include <string>

#include "absl/strings/match.h"
#include "checkpoint/checkpoint.h"
#include "gtest/gtest.h"

namespace lockstep::checkpoint {
namespace {

std::string Encoded() {
  v1::Checkpoint c;
  c.set_job_id("job-000003");
  c.set_job_uid("job-000003@17");
  c.set_global_step(40);
  v1::NamedTensor* t = c.add_variables();
  t->set_name("dense/kernel");
  t->mutable_tensor()->set_dtype(v1::F32);
  t->mutable_tensor()->mutable_shape()->add_dims(64);
  t->mutable_tensor()->set_content(std::string(256, '\x5a'));
  absl::StatusOr<std::string> bytes = CheckpointManager::Encode(c);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return *bytes;
}

// Feeds `bytes` in pieces of `piece` bytes; the first error.
absl::Status FeedAll(CheckpointStreamCheck& check, const std::string& bytes, size_t piece) {
  for (size_t at = 0; at < bytes.size(); at += piece) {
    if (absl::Status s = check.Feed(absl::string_view(bytes).substr(at, piece)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(CheckpointStreamCheckTest, AWholeFileInAnyPiecesPassesAndNamesItsJob) {
  const std::string bytes = Encoded();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{24}, size_t{100}, bytes.size()}) {
    CheckpointStreamCheck check(bytes.size());
    ASSERT_TRUE(FeedAll(check, bytes, piece).ok()) << piece;
    ASSERT_TRUE(check.Finish().ok()) << piece;
    ASSERT_TRUE(check.metadata().has_value()) << piece;
    EXPECT_EQ(check.metadata()->job_uid(), "job-000003@17");
    EXPECT_EQ(check.metadata()->global_step(), 40);
    EXPECT_EQ(check.received(), bytes.size());
  }
}

TEST(CheckpointStreamCheckTest, AFlippedPayloadByteFailsAtTheEnd) {
  std::string bytes = Encoded();
  bytes[bytes.size() - 3] ^= 1;  // in the tensor's content
  CheckpointStreamCheck check(bytes.size());
  ASSERT_TRUE(FeedAll(check, bytes, 10).ok());
  absl::Status s = check.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "payload CRC")) << s;
}

TEST(CheckpointStreamCheckTest, ABadHeaderFailsAsSoonAsItIsIn) {
  std::string bytes = Encoded();
  bytes[0] ^= 1;
  CheckpointStreamCheck check(bytes.size());
  absl::Status s = check.Feed(absl::string_view(bytes).substr(0, 24));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "magic")) << s;
  EXPECT_EQ(check.Feed("x").code(), absl::StatusCode::kDataLoss) << "the error stays";
}

TEST(CheckpointStreamCheckTest, ALengthOtherThanAnnouncedFails) {
  const std::string bytes = Encoded();
  {
    CheckpointStreamCheck check(bytes.size() + 5);  // the header disagrees with the size
    EXPECT_EQ(check.Feed(bytes).code(), absl::StatusCode::kDataLoss);
  }
  {
    CheckpointStreamCheck check(bytes.size());
    ASSERT_TRUE(check.Feed(bytes).ok());
    absl::Status s = check.Feed("more");
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(s.message(), "more than the")) << s;
  }
  {
    CheckpointStreamCheck check(bytes.size());
    ASSERT_TRUE(check.Feed(absl::string_view(bytes).substr(0, bytes.size() - 1)).ok());
    absl::Status s = check.Finish();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(s.message(), "truncated")) << s;
  }
}

TEST(CheckpointStreamCheckTest, MetadataOverTheLimitIsRefused) {
  const std::string bytes = Encoded();
  CheckpointStreamCheck check(bytes.size(), /*max_metadata_bytes=*/4);
  absl::Status s = FeedAll(check, bytes, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "metadata of")) << s;
}

}  // namespace
}  // namespace lockstep::checkpoint
