#include "worker/job_strategy.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

TEST(JobCommunicationOptionsTest, CompressionFollowsTheSpec) {
  v1::JobSpec spec;
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kNone);
  spec.mutable_communication()->set_compression(v1::CommunicationSpec::NONE);
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kNone);
  spec.mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kBF16);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
