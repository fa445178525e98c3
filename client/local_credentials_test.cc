#include "client/local_credentials.h"

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
  EXPECT_THAT(LocalCredentials::Flags(c->Viewer()),
              ElementsAre("--tls_ca=" + d + "/ca.crt", "--token=" + c->Viewer().token));
  EXPECT_THAT(LocalCredentials::Flags(TlsOptions{.insecure = true}), ElementsAre("--insecure"));
}

}  // namespace
}  // namespace client
}  // namespace lockstep
