// BroadcastBlob: one rank's byte string (a checkpoint, at a restart or for an evaluator) to
// every rank of a group, bounded and authenticated, over any CollectiveCommunicator.
//
// Two broadcasts from the root. First a fixed 64-byte header (kBlobHeaderBytes):
//   magic u64 "LSBLOB01" | length i64 (kBlobEnd: no more will come) | root i32 | zero u32 |
//   zero u64 | mac[32]
// then, unless it is an end marker, the payload in whole 8-byte words (the tail padded).
//   mac = HMAC-SHA256(K, "lockstep-blob-v1|" label "|" root "|" length "|" payload)
//   K   = HMAC-SHA256(group secret, "lockstep blob broadcast key")
// A receiver checks the header before it allocates anything: a length above the bound the
// caller knows (BlobOptions::max_bytes: for a checkpoint, what the job's variables and
// optimizer slots can encode to) is refused, naming the root, and so is a wrong magic number
// or root. After the payload it checks the MAC: a payload changed on the way (on the wire, a
// relaying rank, a bug) is refused as DATA_LOSS naming the root, never handed on. The label
// (what is sent, such as "restore of step 120", or the evaluator's nth checkpoint) is bound
// into the MAC, so a blob cannot be replayed as another. CRCs inside the payload only find
// accidents; this is what proves the bytes came whole from a holder of the group's secret.
//
// A receiver that refuses a header returns at once without joining the payload's
// broadcast; the group is then failed (its caller ends the attempt, and the other ranks see
// this rank leave). The header, the bound and the MAC are pure functions over byte buffers
// (below): unit-tested and fuzzed (fuzz/blob_broadcast_fuzzer.cc) apart from any socket.
//
// Thread model: free functions; a broadcast is a collective, called by every rank of the
// group in the same order as its other collectives.
#ifndef LOCKSTEP_COLLECTIVES_BLOB_BROADCAST_H_
#define LOCKSTEP_COLLECTIVES_BLOB_BROADCAST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/collective_communicator.h"

namespace lockstep {
namespace collectives {

constexpr size_t kBlobHeaderBytes = 64;
constexpr uint64_t kBlobMagic = 0x3130424f4c42534cull;  // "LSBLOB01" in memory order
constexpr int64_t kBlobEnd = -1;                        // the header's length for "no more"

struct BlobOptions {
  // The group's secret (Partition.secret); the MAC's key is derived from it. Required.
  std::string secret;
  // What the blob is, agreed by every rank beforehand ("restore of step 120"): bound into the
  // MAC and named in errors.
  std::string label;
  // The longest payload a receiver accepts; a longer announcement is refused before
  // anything is allocated. Must be >= 0.
  int64_t max_bytes = 0;
  // What max_bytes is, for errors ("the job's checkpoint bound").
  std::string bound_name = "the receiver's bound";
};

// The root's header for `payload`, or for the end marker when `payload` is nullopt.
std::string EncodeBlobHeader(const BlobOptions& options, int root,
                             std::optional<absl::string_view> payload);

// A receiver's check of the header from `root`, before anything is allocated: the payload's
// length, or kBlobEnd. INVALID_ARGUMENT when `header` is not kBlobHeaderBytes long; DATA_LOSS
// naming the root for a wrong magic number, another root or a negative length;
// RESOURCE_EXHAUSTED naming the root and the bound for a length above options.max_bytes.
absl::StatusOr<int64_t> ParseBlobHeader(absl::string_view header, const BlobOptions& options,
                                        int root);

// The check of the MAC of a header that ParseBlobHeader accepted over the payload that
// followed it (nullopt after an end marker): DATA_LOSS naming the root and the label when
// the bytes are not what a holder of the secret sent.
absl::Status VerifyBlob(absl::string_view header, std::optional<absl::string_view> payload,
                        const BlobOptions& options, int root);

// The collective: on `root`, sends *blob (nullopt: the end marker); elsewhere, replaces *blob
// with what `root` sent. Errors: those above, INVALID_ARGUMENT for a bad root, a missing
// secret or a negative bound (before anything is sent), RESOURCE_EXHAUSTED on the root for a
// payload over the bound (after sending the header, so every receiver fails too), and the
// communicator's.
absl::Status BroadcastBlob(CollectiveCommunicator& comm, std::optional<std::string>* blob, int root,
                           const BlobOptions& options, absl::Time deadline);

// The same for a blob that must come: an end marker from `root` is DATA_LOSS.
absl::Status BroadcastBlob(CollectiveCommunicator& comm, std::string* bytes, int root,
                           const BlobOptions& options, absl::Time deadline);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_BLOB_BROADCAST_H_
