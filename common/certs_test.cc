#include "common/certs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

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

// Only what a host or pod name can be reaches a subject: a name carrying subject syntax
// ("host-b,CN=host-a") would otherwise be read back as another holder.
TEST(CertificateAuthorityTest, NamesAreHostOrPodNames) {
  const std::string dir = Dir("hostnames");
  auto ca = CertificateAuthority::Init(dir);
  ASSERT_TRUE(ca.ok());
  for (const char* bad : {"host-b,CN=host-a", "x,OU=operator", "a=b", "Host1", "host_1", "host 1",
                          "-host", "host-", "a..b", ".a", "a.", "a\nb", "caf\xc3\xa9"}) {
    absl::Status s = (*ca)->Issue({.name = bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("expected a host or pod name (RFC 1123")) << bad;
  }
  EXPECT_EQ((*ca)->Issue({.name = std::string(64, 'a')}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status san = (*ca)->Issue({.name = "ok", .sans = {"x,DNS:evil"}});
  EXPECT_EQ(san.code(), absl::StatusCode::kInvalidArgument) << san;
  EXPECT_THAT(san.message(), HasSubstr("--san"));
  for (const char* good :
       {"host1", "lockstep-worker-0", "lockstep-coordinator.lockstep.svc", "10.0.0.1", "a"}) {
    EXPECT_TRUE(IsValidCertificateName(good)) << good;
  }
  EXPECT_TRUE(IsValidCertificateName(std::string(63, 'a')));
  EXPECT_FALSE(IsValidCertificateName(absl::StrCat(std::string(63, 'a'), ".", std::string(63, 'b'),
                                                   ".", std::string(63, 'c'), ".",
                                                   std::string(63, 'd'))));  // 255
  EXPECT_TRUE((*ca)->Issue({.name = "lockstep-worker-0", .sans = {"localhost", "::1"}}).ok());
}

// A self-signed certificate whose subject has the entries `fields` (field, value), as PEM.
// `type`: how the entries are encoded (MBSTRING_UTF8 as `lockstep certs` writes them, or
// V_ASN1_PRINTABLESTRING as Go's crypto/x509, which cert-manager uses, writes printable ones).
std::string CertificateWithSubject(const std::vector<std::pair<std::string, std::string>>& fields,
                                   int type = MBSTRING_UTF8) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  for (const auto& [field, value] : fields) {
    X509_NAME_add_entry_by_txt(name, field.c_str(), type,
                               reinterpret_cast<const unsigned char*>(value.data()),
                               static_cast<int>(value.size()), -1, 0);
  }
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, size);
  BIO_free(bio);
  X509_free(cert);
  EVP_PKEY_free(key);
  return pem;
}

TEST(ReadCertificateSubjectTest, ReadsTheFieldsOfAnIssuedCertificate) {
  const std::string dir = Dir("subject");
  ASSERT_TRUE(IssueWithNewCa(dir, {.name = "worker-0"}).ok());
  FILE* f = fopen(CertificateAuthority::CertPath(dir, "worker-0").c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string pem(4096, '\0');
  pem.resize(fread(pem.data(), 1, pem.size(), f));
  fclose(f);
  absl::StatusOr<CertificateSubject> subject = ReadCertificateSubject(pem);
  ASSERT_TRUE(subject.ok()) << subject.status();
  EXPECT_EQ(subject->common_name, "worker-0");
  EXPECT_EQ(subject->unit, "daemon");
}

TEST(ReadCertificateSubjectTest, RefusesAmbiguousOrMalformedSubjects) {
  auto read = [](const std::vector<std::pair<std::string, std::string>>& fields) {
    return ReadCertificateSubject(CertificateWithSubject(fields));
  };
  absl::StatusOr<CertificateSubject> ok = read({{"O", "lockstep"}, {"OU", "viewer"}, {"CN", "al"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->common_name, "al");
  EXPECT_EQ(ok->unit, "viewer");

  // Two CNs: naive splitting took the last one as the holder.
  absl::StatusOr<CertificateSubject> two_cn =
      read({{"OU", "daemon"}, {"CN", "host-b"}, {"CN", "host-a"}});
  EXPECT_EQ(two_cn.status().code(), absl::StatusCode::kInvalidArgument) << two_cn.status();
  EXPECT_THAT(two_cn.status().message(), HasSubstr("more than one CN or OU"));
  absl::StatusOr<CertificateSubject> two_ou =
      read({{"OU", "daemon"}, {"OU", "operator"}, {"CN", "host-b"}});
  EXPECT_EQ(two_ou.status().code(), absl::StatusCode::kInvalidArgument) << two_ou.status();
  // Subject syntax inside a CN is not a name.
  absl::StatusOr<CertificateSubject> comma = read({{"OU", "daemon"}, {"CN", "host-b,CN=host-a"}});
  EXPECT_EQ(comma.status().code(), absl::StatusCode::kInvalidArgument) << comma.status();
  EXPECT_THAT(comma.status().message(), HasSubstr("is not a host or pod name"));
  absl::StatusOr<CertificateSubject> nul =
      read({{"OU", "daemon"}, {"CN", std::string("host-a\0x", 8)}});
  EXPECT_EQ(nul.status().code(), absl::StatusCode::kInvalidArgument) << nul.status();
  absl::StatusOr<CertificateSubject> none = read({{"OU", "daemon"}, {"O", "lockstep"}});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
  absl::StatusOr<CertificateSubject> garbage = ReadCertificateSubject("not a certificate");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument) << garbage.status();
  EXPECT_THAT(garbage.status().message(), HasSubstr("not a PEM certificate"));
}

// deploy/k8s: cert-manager's CSI driver requests CN=<pod name>, OU=daemon for each worker pod
// (pods lockstep-worker-N, or lockstep-worker-N-0 with a StatefulSet per worker); they read
// as the pod's name and the daemon role whatever string type encodes them.
TEST(ReadCertificateSubjectTest, ReadsAPodCertificateAsCertManagerRequestsIt) {
  for (const std::string pod : {"lockstep-worker-2", "lockstep-worker-2-0"}) {
    for (int type : {MBSTRING_UTF8, V_ASN1_PRINTABLESTRING}) {
      absl::StatusOr<CertificateSubject> subject =
          ReadCertificateSubject(CertificateWithSubject({{"OU", "daemon"}, {"CN", pod}}, type));
      ASSERT_TRUE(subject.ok()) << pod << " " << type << ": " << subject.status();
      EXPECT_EQ(subject->common_name, pod);
      EXPECT_EQ(subject->unit, "daemon");
    }
  }
}

TEST(NewBearerTokenTest, IsLongAndFresh) {
  const std::string a = NewBearerToken(), b = NewBearerToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace lockstep
