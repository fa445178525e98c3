#include "common/tfrecord.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"

namespace lockstep {
namespace {

// Bytes read from a file at a time: many small records per read.
constexpr size_t kChunkBytes = 256 << 10;

void AppendLe(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t ReadLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string EncodeTfRecord(absl::string_view data) {
  std::string out;
  out.reserve(kTfRecordHeaderSize + data.size() + kTfRecordFooterSize);
  AppendLe(data.size(), 8, &out);
  AppendLe(MaskCrc32c(Crc32c(out.data(), 8)), 4, &out);
  out.append(data.data(), data.size());
  AppendLe(MaskCrc32c(Crc32c(data)), 4, &out);
  return out;
}

TfRecordReader::TfRecordReader(std::string contents, std::string name)
    : size_(contents.size()), name_(std::move(name)), buffer_(std::move(contents)) {}

TfRecordReader::TfRecordReader(std::unique_ptr<std::FILE, FileCloser> file, uint64_t size,
                               std::string name)
    : file_(std::move(file)), size_(size), name_(std::move(name)) {}

absl::StatusOr<TfRecordReader> TfRecordReader::Open(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  struct stat st;
  if (file == nullptr || fstat(fileno(file.get()), &st) != 0) {
    const int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat("cannot open TFRecord file '", path, "': ", strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TFRecord file '", path, "' is not a regular file"));
  }
  return TfRecordReader(std::move(file), static_cast<uint64_t>(st.st_size), path);
}

absl::Status TfRecordReader::Bytes(uint64_t at, size_t n, const char** p) {
  if (at >= buffer_start_ && at + n <= buffer_start_ + buffer_.size()) {
    *p = buffer_.data() + (at - buffer_start_);
    return absl::OkStatus();
  }
  // Only a file input gets here (a buffer holds the whole in-memory input).
  buffer_.resize(static_cast<size_t>(std::min<uint64_t>(std::max(n, kChunkBytes), size_ - at)));
  buffer_start_ = at;
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t got =
        pread(fileno(file_.get()), buffer_.data() + done, buffer_.size() - done, at + done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string why = got < 0 ? strerror(errno) : "the file shrank while being read";
      buffer_.clear();
      return absl::DataLossError(
          absl::StrCat(name_, ": TFRecord at offset ", offset_, ": read failed: ", why));
    }
    done += static_cast<size_t>(got);
  }
  *p = buffer_.data() + (at - buffer_start_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TfRecordReader::Next() {
  const uint64_t left = size_ - offset_;
  if (left == 0) return absl::OutOfRangeError(absl::StrCat(name_, ": no more records"));
  auto loss = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(name_, ": TFRecord at offset ", offset_, ": ", what));
  };
  if (left < kTfRecordHeaderSize) {
    return loss(absl::StrCat("truncated header (", left, " of ", kTfRecordHeaderSize, " bytes)"));
  }
  const char* p = nullptr;
  if (absl::Status s = Bytes(offset_, kTfRecordHeaderSize, &p); !s.ok()) return s;
  const uint64_t length = ReadLe(p, 8);
  if (UnmaskCrc32c(static_cast<uint32_t>(ReadLe(p + 8, 4))) != Crc32c(p, 8)) {
    return loss("length CRC mismatch");
  }
  const uint64_t after_header = left - kTfRecordHeaderSize;
  if (length > after_header) {
    return loss(absl::StrCat("truncated data: length ", length, " but ", after_header,
                             " bytes follow the header"));
  }
  if (after_header - length < kTfRecordFooterSize) {
    return loss(absl::StrCat("truncated footer (", after_header - length, " of ",
                             kTfRecordFooterSize, " bytes)"));
  }
  const size_t body = static_cast<size_t>(length) + kTfRecordFooterSize;
  if (absl::Status s = Bytes(offset_ + kTfRecordHeaderSize, body, &p); !s.ok()) return s;
  absl::string_view data(p, length);
  const uint32_t stored = static_cast<uint32_t>(ReadLe(p + length, 4));
  if (UnmaskCrc32c(stored) != Crc32c(data)) return loss("data CRC mismatch");
  offset_ += kTfRecordHeaderSize + body;
  return std::string(data);
}

}  // namespace lockstep
