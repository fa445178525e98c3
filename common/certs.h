// CertificateAuthority: a cluster's certificate authority on disk, made and used with
// OpenSSL's C API (`lockstep certs init/issue`, `lockstep local`, the tests).
//
// A directory holds the CA (ca.key, ca.crt) and the certificates it issued (<name>.key,
// <name>.crt; keys are written 0600). Keys are ECDSA P-256, signatures SHA-256. A node
// certificate (a daemon: coordinator or lockstepd) is good for both ends of TLS (extended
// key usage serverAuth and clientAuth) and carries OU=daemon; a client certificate is good
// for clientAuth only and carries OU=<its role> (viewer or operator). Both name the holder
// in the subject's CN and in a DNS (or IP) subject alternative name, plus any extra SANs.
// A holder's name is what a host or pod name can be (IsValidCertificateName); the
// coordinator reads it back with ReadCertificateSubject (X.509 fields, never text).
//
// Ownership: holds the CA's key and certificate in memory. Thread model: Issue is
// thread-compatible (one caller at a time).
#ifndef LOCKSTEP_COMMON_CERTS_H_
#define LOCKSTEP_COMMON_CERTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep {

// The organizational unit a daemon's certificate carries; a client certificate carries its
// role instead.
inline constexpr char kDaemonUnit[] = "daemon";

struct CertRequest {
  std::string name;  // the holder: CN and a SAN; also the files' base name
  bool client = false;
  std::string role = "operator";  // client certificates only: OU=viewer or OU=operator
  std::vector<std::string> sans;  // more DNS names or IP addresses ("localhost", "127.0.0.1")
  absl::Time not_before = absl::InfinitePast();  // InfinitePast: an hour ago
  absl::Time not_after = absl::InfinitePast();   // InfinitePast: a year from now
};

class CertificateAuthority {
 public:
  // Makes a new CA in `dir` (created if missing): ca.key and ca.crt, valid 10 years.
  // ALREADY_EXISTS when dir/ca.key exists (a CA is never overwritten).
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> Init(
      const std::string& dir, const std::string& name = "lockstep cluster CA");
  // Loads the CA in `dir`. NOT_FOUND / INVALID_ARGUMENT naming the file.
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> Open(const std::string& dir);
  ~CertificateAuthority();

  // Writes dir/<name>.key and dir/<name>.crt signed by this CA. INVALID_ARGUMENT for a
  // name that is not a valid certificate name (IsValidCertificateName) or is "ca", a SAN
  // that is neither such a name nor an IP address, or an unknown role.
  absl::Status Issue(const CertRequest& request) const;

  const std::string& dir() const { return dir_; }
  std::string ca_cert_path() const { return CaCertPath(dir_); }

  static std::string CaCertPath(const std::string& dir) { return dir + "/ca.crt"; }
  static std::string CertPath(const std::string& dir, const std::string& name) {
    return dir + "/" + name + ".crt";
  }
  static std::string KeyPath(const std::string& dir, const std::string& name) {
    return dir + "/" + name + ".key";
  }

 private:
  struct Material;
  CertificateAuthority(std::string dir, std::unique_ptr<Material> material);

  const std::string dir_;
  std::unique_ptr<Material> material_;
};

// Whether `name` may name a certificate's holder: what a host or pod name can be (RFC 1123):
// dot-separated labels of 1 to 63 lowercase letters, digits and '-', none starting or
// ending with '-', 253 characters at most. Nothing else (no ',', '=', '/', spaces, capitals
// or control characters) ever reaches a subject.
bool IsValidCertificateName(absl::string_view name);

// The fields of a certificate's subject that say who holds it.
struct CertificateSubject {
  std::string common_name;  // CN: the holder's name
  std::string unit;         // OU: "daemon", a client's role, or "" when absent
};

// Reads the subject of the PEM certificate `pem` (as gRPC's auth context gives the peer's,
// GRPC_X509_PEM_CERT_PROPERTY_NAME) with OpenSSL's X509_NAME API. INVALID_ARGUMENT when it
// is no PEM certificate, when its subject has no CN, more than one CN or more than one OU,
// or when the CN is not a valid certificate name (IsValidCertificateName).
absl::StatusOr<CertificateSubject> ReadCertificateSubject(absl::string_view pem);

// Checks that `cert_path` holds a certificate that `ca_path`'s CA signed, that is valid now,
// and that `key_path` holds its private key. The error names the file and what to check.
absl::Status CheckCertificate(const std::string& ca_path, const std::string& cert_path,
                              const std::string& key_path);

// A new random bearer token: 32 bytes from the kernel's CSPRNG (common/secure_random.h), hex.
std::string NewBearerToken();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CERTS_H_
