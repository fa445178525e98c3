#include "coordinator/revoked_certificates.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

TEST(RevokedCertificatesTest, ParsesOneNamePerLineSkippingCommentsAndBlanks) {
  auto revoked = RevokedCertificates::Parse("# stolen 2026-11-28\nhost1\n\n  pod-7  \n", "f");
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->size(), 2);
  EXPECT_TRUE(revoked->contains("host1"));
  EXPECT_TRUE(revoked->contains("pod-7"));
  EXPECT_FALSE(revoked->contains("host0"));
  EXPECT_EQ(RevokedCertificates::Parse("", "f")->size(), 0);
}

TEST(RevokedCertificatesTest, RefusesWhatIsNotACertificateNameNamingTheLine) {
  absl::Status two = RevokedCertificates::Parse("host1\nhost2 host3\n", "revoked").status();
  EXPECT_TRUE(absl::IsInvalidArgument(two)) << two;
  EXPECT_THAT(two.message(), HasSubstr("revoked:2"));
  absl::Status bad = RevokedCertificates::Parse("CN=host1,OU=daemon\n", "revoked").status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_TRUE(absl::IsNotFound(RevokedCertificates::Load("/nonexistent/revoked").status()));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
