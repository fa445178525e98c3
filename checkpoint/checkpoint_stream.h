// CheckpointStreamCheck: checks a checkpoint file (checkpoint.h's format) that arrives in
// pieces, without holding it: the header as soon as its 24 bytes are in (magic, header CRC,
// version, the payload length against the size announced), the payload's CRC32C as it
// passes, and for a version 2 file the metadata (the Checkpoint message without tensor
// contents, which names the job and the step) parsed once it is in. Used where a whole
// checkpoint must not be held: the coordinator relaying a worker's upload to a client
// (coordinator/checkpoint_fetch.h) and a worker checking a file before it sends it
// (worker/checkpoint_upload.h).
//
// Holds the header and the metadata (bounded by `max_metadata_bytes`), nothing else.
// Thread model: one thread at a time (not synchronized).
#ifndef LOCKSTEP_CHECKPOINT_CHECKPOINT_STREAM_H_
#define LOCKSTEP_CHECKPOINT_CHECKPOINT_STREAM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep::checkpoint {

class CheckpointStreamCheck {
 public:
  // Metadata longer than this is refused (DATA_LOSS): it lists names and shapes, never
  // contents, so real ones are far smaller.
  static constexpr uint64_t kDefaultMaxMetadataBytes = uint64_t{64} << 20;

  // `total_bytes`: the whole file's size, as its sender announced it.
  explicit CheckpointStreamCheck(uint64_t total_bytes,
                                 uint64_t max_metadata_bytes = kDefaultMaxMetadataBytes)
      : total_(total_bytes), max_metadata_(max_metadata_bytes) {}

  // The next bytes of the file. DATA_LOSS at the first problem the bytes so far show (a bad
  // header, more bytes than announced, metadata that does not parse); after an error every
  // call answers it again.
  absl::Status Feed(absl::string_view bytes);
  // Every byte arrived: the count, and the payload CRC the header records. DATA_LOSS
  // otherwise.
  absl::Status Finish();

  uint64_t received() const { return received_; }
  // A version 2 file's metadata, once it arrived whole (nullopt before, and for version 1).
  const std::optional<v1::Checkpoint>& metadata() const { return metadata_; }

 private:
  absl::Status Fail(absl::Status s) {
    error_ = s;
    return s;
  }
  // Takes payload bytes into the metadata while it is incomplete.
  absl::Status FeedMetadata(absl::string_view payload);

  const uint64_t total_;
  const uint64_t max_metadata_;
  uint64_t received_ = 0;
  absl::Status error_;
  std::string header_;  // the first kHeaderSize bytes
  uint32_t version_ = 0;
  uint32_t crc_ = 0;  // of the payload so far
  // Version 2: the metadata length (8 bytes) and the metadata, until it parsed.
  std::string meta_;
  bool meta_done_ = false;
  std::optional<v1::Checkpoint> metadata_;
};

}  // namespace lockstep::checkpoint

#endif  // LOCKSTEP_CHECKPOINT_CHECKPOINT_STREAM_H_
