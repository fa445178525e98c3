#include "collectives/transport/tcp/frame_cipher.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <sys/uio.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr int kMaxIov = 16;

absl::Status OpenSslError(const char* what) {
  return absl::InternalError(absl::StrCat("data-plane encryption: OpenSSL ", what, " failed"));
}

// HKDF-SHA256 (RFC 5869) of `secret` with `salt` and `info` into `out`.
bool Hkdf(const std::string& secret, const std::string& salt, const std::string& info,
          unsigned char* out, size_t out_len) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  if (ctx == nullptr) return false;
  size_t len = out_len;
  const bool ok =
      EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_salt(ctx, reinterpret_cast<const unsigned char*>(salt.data()),
                                  static_cast<int>(salt.size())) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx, reinterpret_cast<const unsigned char*>(secret.data()),
                                 static_cast<int>(secret.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx, reinterpret_cast<const unsigned char*>(info.data()),
                                  static_cast<int>(info.size())) > 0 &&
      EVP_PKEY_derive(ctx, out, &len) > 0 && len == out_len;
  EVP_PKEY_CTX_free(ctx);
  return ok;
}

std::string Bytes(const HandshakeNonce& n) {
  return std::string(reinterpret_cast<const char*>(n.data()), n.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<FrameCipher>> FrameCipher::Create(const HandshakeIdentity& me,
                                                                 const HandshakeNonces& nonces,
                                                                 int connector, int acceptor) {
  std::unique_ptr<FrameCipher> c(new FrameCipher());
  const std::string info =
      absl::StrCat("lockstep tcp aes-256-gcm v1|", me.group, "|", connector, ">", acceptor);
  if (!Hkdf(me.secret, Bytes(nonces.acceptor) + Bytes(nonces.connector), info, c->key_.data(),
            c->key_.size())) {
    return OpenSslError("HKDF");
  }
  c->ctx_ = EVP_CIPHER_CTX_new();
  if (c->ctx_ == nullptr) return OpenSslError("EVP_CIPHER_CTX_new");
  return c;
}

FrameCipher::~FrameCipher() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(key_.data(), key_.size());
}

const unsigned char* FrameCipher::NextIv() {
  const uint64_t n = frames_++;
  std::memcpy(iv_.data() + 4, &n, sizeof(n));
  return iv_.data();
}

absl::Status FrameCipher::Seal(PieceCursor& plain, size_t len, unsigned char* out) {
  if ((!keyed_ &&
       EVP_EncryptInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, key_.data(), nullptr) != 1) ||
      EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, NextIv()) != 1) {
    return OpenSslError("EVP_EncryptInit_ex");
  }
  keyed_ = true;
  size_t done = 0;
  iovec iov[kMaxIov];
  while (done < len) {
    const int n = plain.Fill(iov, kMaxIov, len - done);
    if (n == 0) return absl::InternalError("data-plane encryption: the message ended early");
    for (int i = 0; i < n; ++i) {
      int outl = 0;
      if (EVP_EncryptUpdate(ctx_, out + done, &outl,
                            static_cast<const unsigned char*>(iov[i].iov_base),
                            static_cast<int>(iov[i].iov_len)) != 1) {
        return OpenSslError("EVP_EncryptUpdate");
      }
      done += iov[i].iov_len;
      plain.Advance(iov[i].iov_len);
    }
  }
  int outl = 0;
  if (EVP_EncryptFinal_ex(ctx_, out + len, &outl) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kTagBytes, out + len) != 1) {
    return OpenSslError("EVP_EncryptFinal_ex");
  }
  return absl::OkStatus();
}

bool FrameCipher::Open(const unsigned char* in, size_t len, PieceCursor& plain) {
  if ((!keyed_ &&
       EVP_DecryptInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, key_.data(), nullptr) != 1) ||
      EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, NextIv()) != 1) {
    return false;
  }
  keyed_ = true;
  size_t done = 0;
  iovec iov[kMaxIov];
  while (done < len) {
    const int n = plain.Fill(iov, kMaxIov, len - done);
    if (n == 0) return false;
    for (int i = 0; i < n; ++i) {
      int outl = 0;
      if (EVP_DecryptUpdate(ctx_, static_cast<unsigned char*>(iov[i].iov_base), &outl, in + done,
                            static_cast<int>(iov[i].iov_len)) != 1) {
        return false;
      }
      done += iov[i].iov_len;
      plain.Advance(iov[i].iov_len);
    }
  }
  int outl = 0;
  unsigned char tag[kTagBytes], none[kTagBytes];
  std::memcpy(tag, in + len, kTagBytes);
  return EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) == 1 &&
         EVP_DecryptFinal_ex(ctx_, none, &outl) == 1;
}

}  // namespace collectives
}  // namespace lockstep
