#include "worker/chief/tfrecord.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status.h"
#include "worker/chief/file_util.h"

namespace lockstep::chief {
namespace {

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

absl::StatusOr<TfRecordReader> TfRecordReader::Open(const std::string& path) {
  LS_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  return TfRecordReader(std::move(contents), path);
}

absl::StatusOr<std::string> TfRecordReader::Next() {
  const uint64_t left = contents_.size() - offset_;
  if (left == 0) return absl::OutOfRangeError(absl::StrCat(name_, ": no more records"));
  auto loss = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(name_, ": TFRecord at offset ", offset_, ": ", what));
  };
  if (left < kTfRecordHeaderSize) return loss("truncated header");
  const char* p = contents_.data() + offset_;
  const uint64_t length = ReadLe(p, 8);
  if (UnmaskCrc32c(static_cast<uint32_t>(ReadLe(p + 8, 4))) != Crc32c(p, 8)) {
    return loss("length CRC mismatch");
  }
  if (left - kTfRecordHeaderSize < kTfRecordFooterSize ||
      length > left - kTfRecordHeaderSize - kTfRecordFooterSize) {
    return loss(absl::StrCat("truncated: length ", length, " but ", left, " bytes left"));
  }
  absl::string_view data(p + kTfRecordHeaderSize, length);
  const uint32_t stored = static_cast<uint32_t>(ReadLe(p + kTfRecordHeaderSize + length, 4));
  if (UnmaskCrc32c(stored) != Crc32c(data)) return loss("data CRC mismatch");
  offset_ += kTfRecordHeaderSize + length + kTfRecordFooterSize;
  return std::string(data);
}

}  // namespace lockstep::chief
