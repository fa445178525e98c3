#include "collectives/blob_broadcast.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <array>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {
namespace {

using Mac = std::array<unsigned char, 32>;

struct WireHeader {
  uint64_t magic;
  int64_t length;
  int32_t root;
  uint32_t zero32;
  uint64_t zero64;
  Mac mac;
};
static_assert(sizeof(WireHeader) == kBlobHeaderBytes, "the header's wire size");

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};
struct MacFree {
  void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
};

// HMAC-SHA256(K, "lockstep-blob-v1|" label "|" root "|" length "|" payload), streamed so a
// large payload is never copied. Empty when OpenSSL fails (refused by every comparison).
std::optional<Mac> BlobMac(const BlobOptions& options, int root, int64_t length,
                           absl::string_view payload) {
  Mac key{};
  unsigned int key_len = 0;
  static constexpr char kKeyLabel[] = "lockstep blob broadcast key";
  if (HMAC(EVP_sha256(), options.secret.data(), static_cast<int>(options.secret.size()),
           reinterpret_cast<const unsigned char*>(kKeyLabel), sizeof(kKeyLabel) - 1, key.data(),
           &key_len) == nullptr) {
    return std::nullopt;
  }
  std::unique_ptr<EVP_MAC, MacFree> hmac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (hmac == nullptr) return std::nullopt;
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx(EVP_MAC_CTX_new(hmac.get()));
  if (ctx == nullptr) return std::nullopt;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  const std::string prefix =
      absl::StrCat("lockstep-blob-v1|", options.label, "|", root, "|", length, "|");
  Mac out{};
  size_t out_len = 0;
  auto update = [&](absl::string_view bytes) {
    return EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(bytes.data()),
                          bytes.size()) == 1;
  };
  if (EVP_MAC_init(ctx.get(), key.data(), key_len, params) != 1 || !update(prefix) ||
      !update(payload) || EVP_MAC_final(ctx.get(), out.data(), &out_len, out.size()) != 1 ||
      out_len != out.size()) {
    return std::nullopt;
  }
  OPENSSL_cleanse(key.data(), key.size());
  return out;
}

absl::StatusOr<WireHeader> FromBytes(absl::string_view bytes) {
  if (bytes.size() != kBlobHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob header of ", bytes.size(), " bytes; it has ", kBlobHeaderBytes));
  }
  WireHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

absl::Status CheckOptions(const BlobOptions& options, int root, int size) {
  if (root < 0 || root >= size) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast of ", options.label, ": root ", root,
                                                   " is not a rank of this ", size, "-rank group"));
  }
  if (options.secret.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast of ", options.label, ": no group secret to authenticate it with"));
  }
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast of ", options.label, ": negative bound ", options.max_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeBlobHeader(const BlobOptions& options, int root,
                             std::optional<absl::string_view> payload) {
  WireHeader h{};
  h.magic = kBlobMagic;
  h.length = payload.has_value() ? static_cast<int64_t>(payload->size()) : kBlobEnd;
  h.root = root;
  h.mac = BlobMac(options, root, h.length, payload.value_or("")).value_or(Mac{});
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

absl::StatusOr<int64_t> ParseBlobHeader(absl::string_view header, const BlobOptions& options,
                                        int root) {
  LS_ASSIGN_OR_RETURN(const WireHeader h, FromBytes(header));
  if (h.magic != kBlobMagic || h.root != root || h.zero32 != 0 || h.zero64 != 0) {
    return absl::DataLossError(absl::StrCat(
        "rank ", root, " sent a broadcast header of ", options.label,
        " that is not Lockstep's (wrong magic number, root or reserved bytes); do all ranks "
        "run the same Lockstep version?"));
  }
  if (h.length < kBlobEnd) {
    return absl::DataLossError(
        absl::StrCat("rank ", root, " announced ", options.label, " of ", h.length, " bytes"));
  }
  if (h.length > options.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "rank ", root, " announced ", options.label, " of ", h.length, " bytes, over ",
        options.bound_name, " of ", options.max_bytes, " bytes; refused before allocating it"));
  }
  return h.length;
}

absl::Status VerifyBlob(absl::string_view header, std::optional<absl::string_view> payload,
                        const BlobOptions& options, int root) {
  LS_ASSIGN_OR_RETURN(const WireHeader h, FromBytes(header));
  const int64_t length = payload.has_value() ? static_cast<int64_t>(payload->size()) : kBlobEnd;
  const std::optional<Mac> expected = BlobMac(options, root, length, payload.value_or(""));
  if (h.length != length || !expected.has_value() ||
      CRYPTO_memcmp(expected->data(), h.mac.data(), h.mac.size()) != 0) {
    return absl::DataLossError(absl::StrCat(
        "the broadcast of ", options.label, " from rank ", root,
        " failed authentication (HMAC-SHA256 with the group's secret): its bytes were changed "
        "on the way, or it was sent for another group or as something else; refusing it"));
  }
  return absl::OkStatus();
}

absl::Status BroadcastBlob(CollectiveCommunicator& comm, std::optional<std::string>* blob, int root,
                           const BlobOptions& options, absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckOptions(options, root, comm.size()));
  const bool is_root = comm.rank() == root;
  // The header travels as 8 words; 8-byte aligned for any transport.
  std::array<int64_t, kBlobHeaderBytes / 8> words{};
  if (is_root) {
    const std::string header = EncodeBlobHeader(
        options, root, blob->has_value() ? std::optional<absl::string_view>(**blob) : std::nullopt);
    std::memcpy(words.data(), header.data(), header.size());
  }
  LS_RETURN_IF_ERROR(comm.Broadcast(words.data(), words.size(), DType::kI64, root, deadline));
  const absl::string_view header(reinterpret_cast<const char*>(words.data()), kBlobHeaderBytes);
  LS_ASSIGN_OR_RETURN(const int64_t length, ParseBlobHeader(header, options, root));
  if (length == kBlobEnd) {
    LS_RETURN_IF_ERROR(VerifyBlob(header, std::nullopt, options, root));
    blob->reset();
    return absl::OkStatus();
  }
  // Whole 8-byte words travel: the string grows to them for the broadcast, then back.
  std::string& bytes = blob->has_value() && is_root ? **blob : blob->emplace();
  const size_t padded = (static_cast<size_t>(length) + 7) / 8 * 8;
  bytes.resize(padded, '\0');
  absl::Status sent = padded == 0
                          ? absl::OkStatus()
                          : comm.Broadcast(bytes.data(), padded / 8, DType::kI64, root, deadline);
  bytes.resize(static_cast<size_t>(length));
  LS_RETURN_IF_ERROR(sent);
  if (is_root) return absl::OkStatus();
  absl::Status verified = VerifyBlob(header, bytes, options, root);
  if (!verified.ok()) bytes.clear();
  return verified;
}

absl::Status BroadcastBlob(CollectiveCommunicator& comm, std::string* bytes, int root,
                           const BlobOptions& options, absl::Time deadline) {
  std::optional<std::string> blob;
  if (comm.rank() == root) blob = std::move(*bytes);
  absl::Status s = BroadcastBlob(comm, &blob, root, options, deadline);
  if (blob.has_value()) {
    *bytes = std::move(*blob);
  } else if (s.ok()) {
    s = absl::DataLossError(
        absl::StrCat("rank ", root, " sent an end marker, not ", options.label));
  }
  return s;
}

}  // namespace collectives
}  // namespace lockstep
