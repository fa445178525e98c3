// TFRecord framing, as TensorFlow and TensorBoard read it. Each record is
//   uint64 length (little-endian)
//   uint32 masked CRC32C of the 8 length bytes
//   length bytes of data
//   uint32 masked CRC32C of the data
// (masking: common/crc32c.h MaskCrc32c).
//
// EncodeTfRecord frames one record. TfRecordReader walks a whole file (held in memory: event
// files and tests are small) and checks both CRCs of every record. A reader is used by one
// thread at a time.
#ifndef LOCKSTEP_WORKER_CHIEF_TFRECORD_H_
#define LOCKSTEP_WORKER_CHIEF_TFRECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::chief {

inline constexpr size_t kTfRecordHeaderSize = 12;  // length + its CRC
inline constexpr size_t kTfRecordFooterSize = 4;   // data CRC

// The framed bytes of one record holding `data`.
std::string EncodeTfRecord(absl::string_view data);

class TfRecordReader {
 public:
  // Reads the whole file at `path`; errors from the file system name the path.
  static absl::StatusOr<TfRecordReader> Open(const std::string& path);
  // Reads records from `contents`; `name` appears in error messages.
  TfRecordReader(std::string contents, std::string name)
      : contents_(std::move(contents)), name_(std::move(name)) {}

  // The next record's data. OUT_OF_RANGE at the clean end of the input; DATA_LOSS naming
  // the input, the record's offset and what is wrong (length CRC, data CRC, truncation).
  // After an error the reader stays at the bad record.
  absl::StatusOr<std::string> Next();

  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }

 private:
  std::string contents_;
  std::string name_;
  uint64_t offset_ = 0;
};

}  // namespace lockstep::chief

#endif  // LOCKSTEP_WORKER_CHIEF_TFRECORD_H_
