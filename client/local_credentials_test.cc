#include "client/local_credentials.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

TEST(LocalCredentialsTest, MakesVerifiedMaterialAndReusesItInTheSameDirectory) {
  auto first = LocalCredentials::Create(Dir("reuse"));
  ASSERT_TRUE(first.ok()) << first.status();
  auto worker = first->Daemon("worker-0");
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(CheckTlsOptions(*worker, /*need_identity=*/true).ok());
  EXPECT_NE(first->Operator().token, first->Viewer().token);

  // A coordinator restarted on the same work_dir: same CA, same tokens, same certificates.
  auto second = LocalCredentials::Create(Dir("reuse"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->Operator().token, first->Operator().token);
  EXPECT_EQ(second->Viewer().token, first->Viewer().token);
  EXPECT_TRUE(CheckTlsOptions(*second->Daemon("worker-0"), /*need_identity=*/true).ok());
  EXPECT_TRUE(CheckTlsOptions(*second->Daemon("coordinator"), /*need_identity=*/true).ok());
}

TEST(LocalCredentialsTest, FlagsForEachKindOfProcess) {
  auto c = LocalCredentials::Create(Dir("flags"));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string d = c->dir();
  EXPECT_THAT(c->CoordinatorFlags(),
              ElementsAre("--tls_ca=" + d + "/ca.crt", "--tls_cert=" + d + "/coordinator.crt",
                          "--tls_key=" + d + "/coordinator.key", "--tokens_file=" + d + "/tokens"));
  EXPECT_THAT(LocalCredentials::Flags(*c->Daemon("worker-1")),
              ElementsAre("--tls_ca=" + d + "/ca.crt", "--tls_cert=" + d + "/worker-1.crt",
                          "--tls_key=" + d + "/worker-1.key"));
  EXPECT_THAT(LocalCredentials::Flags(c->Viewer()),
              ElementsAre("--tls_ca=" + d + "/ca.crt", "--token=" + c->Viewer().token));
  EXPECT_THAT(LocalCredentials::Flags(TlsOptions{.insecure = true}), ElementsAre("--insecure"));
}

}  // namespace
}  // namespace client
}  // namespace lockstep
