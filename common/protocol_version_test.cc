// CheckProtocolVersion: the same version passes; another one, or none, is refused naming
// both.
#include "common/protocol_version.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

TEST(ProtocolVersionTest, SameVersionPasses) {
  EXPECT_TRUE(CheckProtocolVersion(kProtocolVersion, "worker/0").ok());
}

TEST(ProtocolVersionTest, AnotherVersionIsRefusedNamingBoth) {
  const absl::Status s = CheckProtocolVersion(kProtocolVersion + 1, "worker/3 at 10.0.0.3:2222");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("worker/3 at 10.0.0.3:2222"));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("protocol version ", kProtocolVersion + 1)));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("speaks version ", kProtocolVersion)));
  EXPECT_THAT(s.message(), HasSubstr("same Lockstep release"));
}

TEST(ProtocolVersionTest, NoVersionIsAnOlderDaemonRefusedClearly) {
  const absl::Status s = CheckProtocolVersion(0, "worker/1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("protocol version 0"));
  EXPECT_THAT(s.message(), HasSubstr("from before versions were sent"));
}

}  // namespace
}  // namespace lockstep
