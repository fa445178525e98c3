#include "checkpoint/checkpoint_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "common/crc32c.h"

namespace lockstep::checkpoint {
namespace {

using CM = CheckpointManager;

uint64_t Le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian hosts only, as checkpoint.cc
  return v;
}

}  // namespace

absl::Status CheckpointStreamCheck::Feed(absl::string_view bytes) {
  if (!error_.ok()) return error_;
  if (bytes.size() > total_ - received_) {
    return Fail(absl::DataLossError(absl::StrCat(
        "more than the ", total_, " bytes announced: ", received_ + bytes.size(), " so far")));
  }
  received_ += bytes.size();
  if (header_.size() < CM::kHeaderSize) {
    const size_t n = std::min(bytes.size(), CM::kHeaderSize - header_.size());
    header_.append(bytes.data(), n);
    bytes.remove_prefix(n);
    if (header_.size() < CM::kHeaderSize) return absl::OkStatus();
    absl::StatusOr<uint32_t> version = CM::CheckHeader(header_.data(), total_ - CM::kHeaderSize);
    if (!version.ok()) return Fail(version.status());
    version_ = *version;
  }
  crc_ = Crc32cExtend(crc_, bytes.data(), bytes.size());
  return FeedMetadata(bytes);
}

absl::Status CheckpointStreamCheck::FeedMetadata(absl::string_view payload) {
  if (version_ != CM::kFormatVersion || meta_done_ || payload.empty()) return absl::OkStatus();
  if (meta_.size() < 8) {
    const size_t n = std::min(payload.size(), 8 - meta_.size());
    meta_.append(payload.data(), n);
    payload.remove_prefix(n);
    if (meta_.size() < 8) return absl::OkStatus();
    const uint64_t length = Le64(meta_.data());
    if (length > max_metadata_ || length > total_ - CM::kHeaderSize - 8) {
      return Fail(absl::DataLossError(absl::StrCat("metadata of ", length, " bytes: over the ",
                                                   max_metadata_, " bytes allowed or the file's ",
                                                   total_, " bytes")));
    }
    meta_.reserve(8 + length);
  }
  const uint64_t want = Le64(meta_.data()) + 8;
  const size_t n = std::min<uint64_t>(payload.size(), want - meta_.size());
  meta_.append(payload.data(), n);
  if (meta_.size() < want) return absl::OkStatus();
  v1::Checkpoint parsed;
  if (!parsed.ParseFromArray(meta_.data() + 8, static_cast<int>(want - 8))) {
    return Fail(absl::DataLossError("metadata is not a lockstep.v1.Checkpoint"));
  }
  metadata_ = std::move(parsed);
  meta_done_ = true;
  meta_.clear();
  meta_.shrink_to_fit();
  return absl::OkStatus();
}

absl::Status CheckpointStreamCheck::Finish() {
  if (!error_.ok()) return error_;
  if (received_ != total_ || header_.size() < CM::kHeaderSize) {
    return Fail(absl::DataLossError(
        absl::StrCat("truncated: ", received_, " of the ", total_, " bytes announced")));
  }
  if (CM::PayloadCrc(header_.data()) != crc_) {
    return Fail(absl::DataLossError("payload CRC mismatch"));
  }
  if (version_ == CM::kFormatVersion && !meta_done_) {
    return Fail(absl::DataLossError("truncated: the metadata is incomplete"));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::checkpoint
