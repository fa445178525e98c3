// Fuzz target: the checks a receiver of a checkpoint broadcast makes on what the root sends
// (collectives/blob_broadcast.h) before and after it allocates. The first byte picks the case:
//   0  the rest is a header (64 bytes) and the payload that followed it: ParseBlobHeader, then
//      VerifyBlob when the payload has the announced length. An accepted length must be within
//      the bound, and nothing forged may verify (the fuzzer holds no MAC key);
//   1  the rest is [position u16][payload]: an honest header for the payload, whose byte at
//      `position` (of header + payload) is then flipped: the flipped message must not verify.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "collectives/blob_broadcast.h"

namespace {

using lockstep::collectives::BlobOptions;
using lockstep::collectives::kBlobEnd;
using lockstep::collectives::kBlobHeaderBytes;

constexpr int kRoot = 1;

const BlobOptions& Options() {
  static const BlobOptions* const o = [] {
    auto* o = new BlobOptions;
    o->secret = "secret";
    o->label = "the checkpoint of step 7 for jobs/j/0";
    o->max_bytes = 4096;
    return o;
  }();
  return *o;
}

// True when the header and payload parse and verify.
bool Accepted(absl::string_view header, absl::string_view payload) {
  absl::StatusOr<int64_t> length = lockstep::collectives::ParseBlobHeader(header, Options(), kRoot);
  if (!length.ok()) return false;
  if (*length < kBlobEnd || *length > Options().max_bytes) std::abort();  // past the bound
  if (*length == kBlobEnd) {
    return payload.empty() &&
           lockstep::collectives::VerifyBlob(header, std::nullopt, Options(), kRoot).ok();
  }
  if (payload.size() != static_cast<size_t>(*length)) return false;
  return lockstep::collectives::VerifyBlob(header, payload, Options(), kRoot).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    const absl::string_view header = rest.substr(0, kBlobHeaderBytes);
    const absl::string_view payload =
        rest.size() > kBlobHeaderBytes ? rest.substr(kBlobHeaderBytes) : absl::string_view();
    (void)Accepted(header, payload);
    return 0;
  }
  if (rest.size() < 2) return 0;
  uint16_t position;
  std::memcpy(&position, rest.data(), sizeof(position));
  const absl::string_view payload = rest.substr(2, Options().max_bytes);
  std::string message =
      lockstep::collectives::EncodeBlobHeader(Options(), kRoot, payload) + std::string(payload);
  if (!Accepted(absl::string_view(message).substr(0, kBlobHeaderBytes),
                absl::string_view(message).substr(kBlobHeaderBytes))) {
    std::abort();  // an honest message must verify
  }
  message[position % message.size()] ^= 0x01;
  if (Accepted(absl::string_view(message).substr(0, kBlobHeaderBytes),
               absl::string_view(message).substr(kBlobHeaderBytes))) {
    std::abort();  // a flipped bit went unnoticed
  }
  return 0;
}
