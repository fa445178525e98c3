#include "client/local_credentials.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

// The whole file ("" when it cannot be read).
std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(LocalCredentialsTest, MakesVerifiedMaterialAndReusesItInTheSameDirectory) {
  auto first = LocalCredentials::Create(Dir("reuse"));
  ASSERT_TRUE(first.ok()) << first.status();
  auto worker = first->Daemon("worker-0");
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::Status verified = CheckTlsOptions(*worker, /*need_identity=*/true);
  EXPECT_TRUE(verified.ok()) << verified;
  EXPECT_NE(first->Operator().token, first->Viewer().token);
  const std::string ca = Contents(first->ca_file());
  const std::string cert = Contents(worker->cert_file);
  const std::string key = Contents(worker->key_file);
  ASSERT_THAT(ca, HasSubstr("-----BEGIN CERTIFICATE-----"));
  ASSERT_THAT(cert, HasSubstr("-----BEGIN CERTIFICATE-----"));
  ASSERT_THAT(key, HasSubstr("PRIVATE KEY-----"));

  // A coordinator restarted on the same work_dir: same CA, same tokens, same certificates.
  auto second = LocalCredentials::Create(Dir("reuse"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->Operator().token, first->Operator().token);
  EXPECT_EQ(second->Viewer().token, first->Viewer().token);
  EXPECT_EQ(second->ca_file(), first->ca_file());
  EXPECT_EQ(Contents(second->ca_file()), ca) << "the CA was made anew";
  auto worker_again = second->Daemon("worker-0");
  ASSERT_TRUE(worker_again.ok()) << worker_again.status();
  EXPECT_EQ(worker_again->cert_file, worker->cert_file);
  EXPECT_EQ(Contents(worker_again->cert_file), cert) << "worker-0's certificate was reissued";
  EXPECT_EQ(Contents(worker_again->key_file), key) << "worker-0's key was made anew";
  verified = CheckTlsOptions(*worker_again, /*need_identity=*/true);
  EXPECT_TRUE(verified.ok()) << verified;
  auto coordinator = second->Daemon("coordinator");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  verified = CheckTlsOptions(*coordinator, /*need_identity=*/true);
  EXPECT_TRUE(verified.ok()) << verified;
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
  // A token never goes on a command line: a client child reads it from its config file.
  EXPECT_THAT(LocalCredentials::Flags(c->Viewer()), ElementsAre("--tls_ca=" + d + "/ca.crt"));
  EXPECT_THAT(c->OperatorFlags(), ElementsAre("--config=" + d + "/operator.config"));
  EXPECT_THAT(c->ViewerFlags(), ElementsAre("--config=" + d + "/viewer.config"));
  EXPECT_THAT(Contents(d + "/operator.config"),
              HasSubstr("ca: " + d + "/ca.crt\ntoken: " + c->Operator().token + "\n"));
  EXPECT_THAT(Contents(d + "/viewer.config"), HasSubstr("token: " + c->Viewer().token + "\n"));
  EXPECT_THAT(LocalCredentials::Flags(TlsOptions{.insecure = true}), ElementsAre("--insecure"));
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(LocalCredentialsTest, EverySecretIsPrivateToThisUser) {
  const std::string d = Dir("private");
  auto c = LocalCredentials::Create(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->Daemon("worker-0").ok());
  EXPECT_EQ(ModeOf(d), 0700u);
  for (const char* f : {"tokens", "operator.config", "viewer.config", "ca.key", "coordinator.key",
                        "worker-0.key"}) {
    EXPECT_EQ(ModeOf(absl::StrCat(d, "/", f)), 0600u) << f;
  }
  // A work dir from before this rule: its tokens (kept) and directory are narrowed.
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((d + "/tokens").c_str(), 0644), 0);
  auto again = LocalCredentials::Create(d);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->Operator().token, c->Operator().token);
  EXPECT_EQ(ModeOf(d), 0700u);
  EXPECT_EQ(ModeOf(d + "/tokens"), 0600u);
}

}  // namespace
}  // namespace client
}  // namespace lockstep
