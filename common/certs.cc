#include "common/certs.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/secure_random.h"
#include "common/status.h"

namespace lockstep {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct X509StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
struct X509StoreCtxFree {
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct FileClose {
  void operator()(FILE* f) const { fclose(f); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

// OpenSSL's last error, as text.
std::string SslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

absl::Status SslFailure(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", SslError()));
}

// Opens `path` for writing with `mode` (a key: 0600), replacing what was there.
absl::StatusOr<std::unique_ptr<FILE, FileClose>> OpenForWrite(const std::string& path, int mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  fchmod(fd, mode);
  FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<FILE, FileClose>(f);
}

absl::Status WriteKey(const std::string& path, EVP_PKEY* key) {
  LS_ASSIGN_OR_RETURN(auto f, OpenForWrite(path, 0600));
  if (PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return SslFailure(absl::StrCat("writing ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteCert(const std::string& path, X509* cert) {
  LS_ASSIGN_OR_RETURN(auto f, OpenForWrite(path, 0644));
  if (PEM_write_X509(f.get(), cert) != 1) return SslFailure(absl::StrCat("writing ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FILE, FileClose>> OpenForRead(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<FILE, FileClose>(f);
}

absl::StatusOr<Pkey> ReadKey(const std::string& path) {
  LS_ASSIGN_OR_RETURN(auto f, OpenForRead(path));
  Pkey key(PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a PEM private key (", SslError(), ")"));
  }
  return key;
}

absl::StatusOr<Cert> ReadCert(const std::string& path) {
  LS_ASSIGN_OR_RETURN(auto f, OpenForRead(path));
  Cert cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a PEM certificate (", SslError(), ")"));
  }
  return cert;
}

absl::StatusOr<Pkey> NewKey() {
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return SslFailure("generating an EC P-256 key");
  return key;
}

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) return SslFailure(absl::StrCat("certificate extension ", value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return SslFailure(absl::StrCat("certificate extension ", value));
  return absl::OkStatus();
}

absl::Status AddNameEntry(X509_NAME* name, const char* field, const std::string& value) {
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                 0) != 1) {
    return SslFailure(absl::StrCat("certificate subject ", field, "=", value));
  }
  return absl::OkStatus();
}

bool IsIpAddress(const std::string& s) {
  ASN1_OCTET_STRING* ip = a2i_IPADDRESS(s.c_str());
  ERR_clear_error();
  if (ip == nullptr) return false;
  ASN1_OCTET_STRING_free(ip);
  return true;
}

// A certificate for `key` with a random serial, the validity, and subject O=lockstep,
// OU=`unit`, CN=`cn`; unsigned, without extensions.
absl::StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& unit, const std::string& cn,
                             absl::Time not_before, absl::Time not_after) {
  Cert cert(X509_new());
  if (cert == nullptr) return SslFailure("X509_new");
  X509_set_version(cert.get(), 2);  // v3
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return SslFailure("RAND_bytes");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), absl::ToTimeT(not_before));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), absl::ToTimeT(not_after));
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  LS_RETURN_IF_ERROR(AddNameEntry(subject, "O", "lockstep"));
  LS_RETURN_IF_ERROR(AddNameEntry(subject, "OU", unit));
  LS_RETURN_IF_ERROR(AddNameEntry(subject, "CN", cn));
  return cert;
}

}  // namespace

struct CertificateAuthority::Material {
  Pkey key;
  Cert cert;
};

CertificateAuthority::CertificateAuthority(std::string dir, std::unique_ptr<Material> material)
    : dir_(std::move(dir)), material_(std::move(material)) {}

CertificateAuthority::~CertificateAuthority() = default;

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::Init(
    const std::string& dir, const std::string& name) {
  LS_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string key_path = KeyPath(dir, "ca");
  if (access(key_path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        key_path, " exists: a CA is never overwritten (remove it, or issue with the CA in ", dir,
        ")"));
  }
  auto m = std::make_unique<Material>();
  LS_ASSIGN_OR_RETURN(m->key, NewKey());
  const absl::Time now = absl::Now();
  LS_ASSIGN_OR_RETURN(m->cert, NewCert(m->key.get(), "ca", name, now - absl::Hours(1),
                                       now + absl::Hours(24 * 3650)));
  X509_set_issuer_name(m->cert.get(), X509_get_subject_name(m->cert.get()));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, m->cert.get(), m->cert.get(), nullptr, nullptr, 0);
  LS_RETURN_IF_ERROR(
      AddExtension(m->cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  LS_RETURN_IF_ERROR(
      AddExtension(m->cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"));
  LS_RETURN_IF_ERROR(AddExtension(m->cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (X509_sign(m->cert.get(), m->key.get(), EVP_sha256()) == 0)
    return SslFailure("signing the CA");
  LS_RETURN_IF_ERROR(WriteKey(key_path, m->key.get()));
  LS_RETURN_IF_ERROR(WriteCert(CaCertPath(dir), m->cert.get()));
  return std::unique_ptr<CertificateAuthority>(new CertificateAuthority(dir, std::move(m)));
}

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::Open(
    const std::string& dir) {
  auto m = std::make_unique<Material>();
  LS_ASSIGN_OR_RETURN(m->key, ReadKey(KeyPath(dir, "ca")));
  LS_ASSIGN_OR_RETURN(m->cert, ReadCert(CaCertPath(dir)));
  if (X509_check_private_key(m->cert.get(), m->key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(KeyPath(dir, "ca"), " is not the key of ", CaCertPath(dir)));
  }
  return std::unique_ptr<CertificateAuthority>(new CertificateAuthority(dir, std::move(m)));
}

absl::Status CertificateAuthority::Issue(const CertRequest& request) const {
  if (!IsValidCertificateName(request.name) || request.name == "ca") {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate name \"", absl::CHexEscape(request.name),
        "\": expected a host or pod name (RFC 1123: lowercase letters, digits, '-' and '.', "
        "labels of 1 to 63 characters; not \"ca\")"));
  }
  for (const std::string& san : request.sans) {
    if (!san.empty() && !IsValidCertificateName(san) && !IsIpAddress(san)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--san \"", absl::CHexEscape(san),
                       "\": expected a host name (RFC 1123, lowercase) or an IP address"));
    }
  }
  if (request.client && request.role != "viewer" && request.role != "operator") {
    return absl::InvalidArgumentError(absl::StrCat("client certificate role \"", request.role,
                                                   "\": expected viewer or operator"));
  }
  const absl::Time now = absl::Now();
  const absl::Time not_before =
      request.not_before == absl::InfinitePast() ? now - absl::Hours(1) : request.not_before;
  const absl::Time not_after =
      request.not_after == absl::InfinitePast() ? now + absl::Hours(24 * 365) : request.not_after;
  LS_ASSIGN_OR_RETURN(Pkey key, NewKey());
  LS_ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), request.client ? request.role : kDaemonUnit,
                                         request.name, not_before, not_after));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(material_->cert.get()));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, material_->cert.get(), cert.get(), nullptr, nullptr, 0);
  LS_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  LS_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature,keyAgreement"));
  LS_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_ext_key_usage,
                                  request.client ? "clientAuth" : "serverAuth,clientAuth"));
  std::vector<std::string> sans = {request.name};
  sans.insert(sans.end(), request.sans.begin(), request.sans.end());
  std::vector<std::string> entries;
  for (const std::string& s : sans) {
    if (s.empty()) continue;
    entries.push_back(absl::StrCat(IsIpAddress(s) ? "IP:" : "DNS:", s));
  }
  LS_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_subject_alt_name, absl::StrJoin(entries, ",")));
  LS_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), material_->key.get(), EVP_sha256()) == 0) {
    return SslFailure(absl::StrCat("signing the certificate of ", request.name));
  }
  LS_RETURN_IF_ERROR(WriteKey(KeyPath(dir_, request.name), key.get()));
  return WriteCert(CertPath(dir_, request.name), cert.get());
}

absl::Status CheckCertificate(const std::string& ca_path, const std::string& cert_path,
                              const std::string& key_path) {
  LS_ASSIGN_OR_RETURN(Cert ca, ReadCert(ca_path));
  LS_ASSIGN_OR_RETURN(Cert cert, ReadCert(cert_path));
  LS_ASSIGN_OR_RETURN(Pkey key, ReadKey(key_path));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(key_path, " is not the key of ", cert_path));
  }
  std::unique_ptr<X509_STORE, X509StoreFree> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, X509StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (store == nullptr || ctx == nullptr || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return SslFailure("setting up certificate verification");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(cert_path, " does not verify against ", ca_path,
                                                   ": ", X509_verify_cert_error_string(err),
                                                   "; issue it again with `lockstep certs issue`"));
  }
  return absl::OkStatus();
}

bool IsValidCertificateName(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
    }
  }
  return true;
}

namespace {

// The one entry of `nid` in `name` as UTF-8: "" when there is none, nullopt when there are
// several or it does not convert.
std::optional<std::string> OnlyEntry(X509_NAME* name, int nid) {
  const int first = X509_NAME_get_index_by_NID(name, nid, -1);
  if (first < 0) return "";
  if (X509_NAME_get_index_by_NID(name, nid, first) >= 0) return std::nullopt;
  X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, first);
  unsigned char* utf8 = nullptr;
  const int length = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry));
  if (length < 0) {
    ERR_clear_error();
    return std::nullopt;
  }
  std::string out(reinterpret_cast<const char*>(utf8), length);
  OPENSSL_free(utf8);
  return out;
}

}  // namespace

absl::StatusOr<CertificateSubject> ReadCertificateSubject(absl::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return SslFailure("BIO_new_mem_buf");
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("not a PEM certificate (", SslError(), ")"));
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  std::optional<std::string> cn = OnlyEntry(name, NID_commonName);
  std::optional<std::string> ou = OnlyEntry(name, NID_organizationalUnitName);
  if (!cn.has_value() || !ou.has_value()) {
    return absl::InvalidArgumentError(
        "certificate subject: more than one CN or OU (or one that is not text); a holder "
        "has one name and one role");
  }
  if (!IsValidCertificateName(*cn)) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate subject: CN \"", absl::CHexEscape(*cn),
                     "\" is not a host or pod name (RFC 1123, lowercase); issue the "
                     "certificate with `lockstep certs issue`"));
  }
  return CertificateSubject{*std::move(cn), *std::move(ou)};
}

std::string NewBearerToken() { return SecureRandomHex(32); }

}  // namespace lockstep
