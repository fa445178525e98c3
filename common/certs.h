// CertificateAuthority: a cluster's certificate authority on disk, made and used with
// OpenSSL's C API (`lockstep certs init/issue`, `lockstep local`, the tests).
//
// A directory holds the CA (ca.key, ca.crt) and the certificates it issued (<name>.key,
// <name>.crt; keys are written 0600). Keys are ECDSA P-256, signatures SHA-256. A node
// certificate (a daemon: coordinator or lockstepd) is good for both ends of TLS (extended
// key usage serverAuth and clientAuth) and carries OU=daemon; a client certificate is good
// for clientAuth only and carries OU=<its role> (viewer or operator). Both name the holder
// in the subject's CN and in a DNS (or IP) subject alternative name, plus any extra SANs.
//
// Ownership: holds the CA's key and certificate in memory. Thread model: Issue is
// thread-compatible (one caller at a time).
#ifndef LOCKSTEP_COMMON_CERTS_H_
#define LOCKSTEP_COMMON_CERTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

  // Writes dir/<name>.key and dir/<name>.crt signed by this CA. INVALID_ARGUMENT for an
  // empty name, a name with '/', or an unknown role.
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

// Checks that `cert_path` holds a certificate that `ca_path`'s CA signed, that is valid now,
// and that `key_path` holds its private key. The error names the file and what to check.
absl::Status CheckCertificate(const std::string& ca_path, const std::string& cert_path,
                              const std::string& key_path);

// A new random bearer token: 32 bytes from OpenSSL's CSPRNG, hex.
std::string NewBearerToken();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CERTS_H_
