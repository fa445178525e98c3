#include "distribute/auto_shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace lockstep::distribute {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kFour = {"a", "b", "c", "d"};

TEST(AutoShardTest, FileGivesEachWorkerItsFiles) {
  auto w0 = ResolveAutoShard(AutoShardPolicy::kFile, kFour, 2, 0);
  auto w1 = ResolveAutoShard(AutoShardPolicy::kFile, kFour, 2, 1);
  ASSERT_TRUE(w0.ok() && w1.ok());
  EXPECT_THAT(w0->spec.files, ElementsAre("a", "c"));
  EXPECT_THAT(w1->spec.files, ElementsAre("b", "d"));
  EXPECT_EQ(w1->spec.num_file_shards, 2);
  EXPECT_EQ(w1->spec.file_shard_index, 1);
  EXPECT_EQ(w1->spec.num_shards, 1);
  // A source that only knows how many files it reads.
  auto counted = ResolveAutoShard(AutoShardPolicy::kAuto, {}, 2, 1, /*num_files=*/3);
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ(counted->policy, AutoShardPolicy::kFile);
  EXPECT_EQ(counted->spec.file_shard_index, 1);
}

TEST(AutoShardTest, DataReadsEverythingAndKeepsItsShare) {
  auto w1 = ResolveAutoShard(AutoShardPolicy::kData, kFour, 2, 1);
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ(w1->policy, AutoShardPolicy::kData);
  EXPECT_EQ(w1->spec.files, kFour);
  EXPECT_EQ(w1->spec.num_shards, 2);
  EXPECT_EQ(w1->spec.shard_index, 1);
}

TEST(AutoShardTest, OffAndOneWorkerShardNothing) {
  for (auto plan : {ResolveAutoShard(AutoShardPolicy::kOff, kFour, 2, 1),
                    ResolveAutoShard(AutoShardPolicy::kFile, kFour, 1, 0)}) {
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->policy, AutoShardPolicy::kOff);
    EXPECT_EQ(plan->spec.files, kFour);
    EXPECT_EQ(plan->spec.num_shards, 1);
  }
}

TEST(AutoShardTest, AutoPrefersFilesAndFallsBackToData) {
  auto files = ResolveAutoShard(AutoShardPolicy::kAuto, kFour, 2, 0);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->policy, AutoShardPolicy::kFile);
  auto few = ResolveAutoShard(AutoShardPolicy::kAuto, {"only"}, 2, 0);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->policy, AutoShardPolicy::kData);
  EXPECT_THAT(few->reason, HasSubstr("1 input file(s) for 2 workers"));
  auto none = ResolveAutoShard(AutoShardPolicy::kAuto, {}, 2, 0);
  EXPECT_EQ(none->policy, AutoShardPolicy::kData);
  EXPECT_THAT(none->reason, HasSubstr("not read from files"));
}

TEST(AutoShardTest, FileWithTooFewFilesIsRefused) {
  auto plan = ResolveAutoShard(AutoShardPolicy::kFile, {"only"}, 2, 0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("use DATA or OFF"));
  auto out_of_range = ResolveAutoShard(AutoShardPolicy::kData, kFour, 2, 2);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument)
      << out_of_range.status();
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("auto-shard: worker 2 of 2"));
}

TEST(AutoShardTest, ParsesPolicyNames) {
  EXPECT_EQ(*ParseAutoShardPolicy("file"), AutoShardPolicy::kFile);
  EXPECT_EQ(*ParseAutoShardPolicy("AUTO"), AutoShardPolicy::kAuto);
  auto hint = ParseAutoShardPolicy("HINT");
  EXPECT_EQ(hint.status().code(), absl::StatusCode::kInvalidArgument) << hint.status();
  EXPECT_THAT(hint.status().message(), HasSubstr("unknown auto-shard policy \"HINT\""));
}

}  // namespace
}  // namespace lockstep::distribute
