#include "common/certs.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string Subject(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  fclose(f);
  if (cert == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  X509_free(cert);
  return buf;
}

// 1 when the certificate at `path` matches `host` (a DNS name) or `ip`.
int MatchesHost(const std::string& path, const std::string& host, const std::string& ip) {
  FILE* f = fopen(path.c_str(), "r");
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  fclose(f);
  int r = host.empty() ? X509_check_ip_asc(cert, ip.c_str(), 0)
                       : X509_check_host(cert, host.c_str(), host.size(), 0, nullptr);
  X509_free(cert);
  return r;
}

// A new CA in `dir` that issued `request`.
absl::Status IssueWithNewCa(const std::string& dir, const CertRequest& request) {
  auto ca = CertificateAuthority::Init(dir);
  if (!ca.ok()) return ca.status();
  return (*ca)->Issue(request);
}

TEST(CertificateAuthorityTest, IssuesNodeCertificatesThatVerify) {
  const std::string dir = Dir("node");
  ASSERT_TRUE(IssueWithNewCa(dir, {.name = "worker-0", .sans = {"localhost", "127.0.0.1"}}).ok());
  EXPECT_TRUE(CheckCertificate(CertificateAuthority::CaCertPath(dir),
                               CertificateAuthority::CertPath(dir, "worker-0"),
                               CertificateAuthority::KeyPath(dir, "worker-0"))
                  .ok());
  EXPECT_THAT(Subject(CertificateAuthority::CertPath(dir, "worker-0")),
              HasSubstr("OU=daemon/CN=worker-0"));
  EXPECT_EQ(MatchesHost(CertificateAuthority::CertPath(dir, "worker-0"), "worker-0", ""), 1);
  EXPECT_EQ(MatchesHost(CertificateAuthority::CertPath(dir, "worker-0"), "localhost", ""), 1);
  EXPECT_EQ(MatchesHost(CertificateAuthority::CertPath(dir, "worker-0"), "", "127.0.0.1"), 1);
  EXPECT_EQ(MatchesHost(CertificateAuthority::CertPath(dir, "worker-0"), "other", ""), 0);
  struct stat st;
  ASSERT_EQ(stat(CertificateAuthority::KeyPath(dir, "worker-0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST(CertificateAuthorityTest, ClientCertificatesCarryTheirRole) {
  const std::string dir = Dir("client");
  CertRequest r{.name = "alice", .client = true, .role = "viewer"};
  ASSERT_TRUE(IssueWithNewCa(dir, r).ok());
  EXPECT_THAT(Subject(CertificateAuthority::CertPath(dir, "alice")),
              HasSubstr("OU=viewer/CN=alice"));
  r.role = "admin";
  EXPECT_EQ((*CertificateAuthority::Open(dir))->Issue(r).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CertificateAuthorityTest, OpenUsesTheSameCaAndInitNeverOverwrites) {
  const std::string dir = Dir("reopen");
  ASSERT_TRUE(CertificateAuthority::Init(dir).ok());
  auto again = CertificateAuthority::Init(dir);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  auto ca = CertificateAuthority::Open(dir);
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE((*ca)->Issue({.name = "coordinator"}).ok());
  EXPECT_TRUE(CheckCertificate(CertificateAuthority::CaCertPath(dir),
                               CertificateAuthority::CertPath(dir, "coordinator"),
                               CertificateAuthority::KeyPath(dir, "coordinator"))
                  .ok());
}

TEST(CertificateAuthorityTest, CheckRefusesAnotherCaAnExpiredCertificateAndAWrongKey) {
  const std::string a = Dir("ca_a"), b = Dir("ca_b");
  auto ca_a = CertificateAuthority::Init(a);
  auto ca_b = CertificateAuthority::Init(b);
  ASSERT_TRUE(ca_a.ok() && ca_b.ok());
  ASSERT_TRUE((*ca_b)->Issue({.name = "stranger"}).ok());
  absl::Status s = CheckCertificate(CertificateAuthority::CaCertPath(a),
                                    CertificateAuthority::CertPath(b, "stranger"),
                                    CertificateAuthority::KeyPath(b, "stranger"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not verify"));

  CertRequest old;
  old.name = "old";
  old.not_before = absl::Now() - absl::Hours(48);
  old.not_after = absl::Now() - absl::Hours(24);
  ASSERT_TRUE((*ca_a)->Issue(old).ok());
  s = CheckCertificate(CertificateAuthority::CaCertPath(a),
                       CertificateAuthority::CertPath(a, "old"),
                       CertificateAuthority::KeyPath(a, "old"));
  EXPECT_THAT(s.message(), HasSubstr("expired"));

  ASSERT_TRUE((*ca_a)->Issue({.name = "good"}).ok());
  s = CheckCertificate(CertificateAuthority::CaCertPath(a),
                       CertificateAuthority::CertPath(a, "good"),
                       CertificateAuthority::KeyPath(a, "old"));
  EXPECT_THAT(s.message(), HasSubstr("is not the key of"));
}

TEST(CertificateAuthorityTest, RefusesBadNamesAndMissingFiles) {
  const std::string dir = Dir("names");
  auto ca = CertificateAuthority::Init(dir);
  ASSERT_TRUE(ca.ok());
  EXPECT_EQ((*ca)->Issue({.name = ""}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*ca)->Issue({.name = "../x"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*ca)->Issue({.name = "ca"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CertificateAuthority::Open(Dir("nothing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(NewBearerTokenTest, IsLongAndFresh) {
  const std::string a = NewBearerToken(), b = NewBearerToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace lockstep
