// TFRecord framing, as TensorFlow writes and reads it (tf.io.TFRecordWriter, TensorBoard's
// event files). Each record is
//   uint64 length (little-endian)
//   uint32 masked CRC32C of the 8 length bytes
//   length bytes of data
//   uint32 masked CRC32C of the data
// (masking: common/crc32c.h MaskCrc32c). No compression.
//
// One implementation for every user: the chief's TensorBoard event files
// (worker/chief/event_writer) and TFRecord training data (data/example_reader).
//
// EncodeTfRecord frames one record. TfRecordReader walks a file (read in chunks, so a large
// file is never held whole) or an in-memory buffer and checks both CRCs of every record; a
// length that runs past the end of the input is refused before anything is allocated for it.
// Errors name the input and the byte offset of the record, never its contents. A reader is
// a movable value used by one thread at a time.
#ifndef LOCKSTEP_COMMON_TFRECORD_H_
#define LOCKSTEP_COMMON_TFRECORD_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

inline constexpr size_t kTfRecordHeaderSize = 12;  // length + its CRC
inline constexpr size_t kTfRecordFooterSize = 4;   // data CRC

// The framed bytes of one record holding `data`.
std::string EncodeTfRecord(absl::string_view data);

class TfRecordReader {
 public:
  // Opens the file at `path` (NOT_FOUND, PERMISSION_DENIED, ... naming it); nothing is read
  // yet.
  static absl::StatusOr<TfRecordReader> Open(const std::string& path);
  // Reads records from `contents`; `name` appears in error messages.
  TfRecordReader(std::string contents, std::string name);

  // The next record's data. OUT_OF_RANGE at the clean end of the input; DATA_LOSS naming
  // the input, the record's offset and what is wrong (length CRC, data CRC, truncated
  // header, data or footer, a read error). After an error the reader stays at the bad record.
  absl::StatusOr<std::string> Next();

  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  const std::string& name() const { return name_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  TfRecordReader(std::unique_ptr<std::FILE, FileCloser> file, uint64_t size, std::string name);

  // Points *p at bytes [at, at + n) of the input, which lie within size_: from the buffer
  // when it holds them, else after refilling it from the file at `at`.
  absl::Status Bytes(uint64_t at, size_t n, const char** p);

  std::unique_ptr<std::FILE, FileCloser> file_;  // null for an in-memory input
  uint64_t size_ = 0;                            // bytes in the input
  std::string name_;
  std::string buffer_;         // input bytes [buffer_start_, buffer_start_ + buffer_.size())
  uint64_t buffer_start_ = 0;  // the whole input when file_ is null
  uint64_t offset_ = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_TFRECORD_H_
