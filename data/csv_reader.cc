#include "data/csv_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::data {

CsvReader::CsvReader(std::vector<std::string> files, CsvOptions options)
    : files_(std::move(files)), options_(std::move(options)) {}

CsvReader::~CsvReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

absl::StatusOr<bool> CsvReader::ReadLine() {
  while (file_index_ < files_.size()) {
    if (gz_ == nullptr) {
      gz_ = gzopen(files_[file_index_].c_str(), "rb");
      if (gz_ == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("cannot open CSV file ", files_[file_index_], ": ", std::strerror(errno)));
      }
      line_number_ = 0;
    }
    line_.clear();
    char buf[4096];
    bool got = false;
    while (gzgets(static_cast<gzFile>(gz_), buf, sizeof(buf)) != nullptr) {
      got = true;
      line_ += buf;
      if (!line_.empty() && line_.back() == '\n') break;
    }
    if (got) {
      ++line_number_;
      while (!line_.empty() && (line_.back() == '\n' || line_.back() == '\r')) line_.pop_back();
      if (line_number_ == 1 && options_.header) continue;
      if (absl::StripAsciiWhitespace(line_).empty()) continue;
      return true;
    }
    int err;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &err);
    if (err != Z_OK && err != Z_STREAM_END) {
      return absl::DataLossError(absl::StrCat("reading CSV file ", files_[file_index_],
                                              " after line ", line_number_, ": ", msg));
    }
    gzclose(static_cast<gzFile>(gz_));
    gz_ = nullptr;
    ++file_index_;
  }
  return false;
}

absl::Status CsvReader::ParseLine(Element* out) {
  std::vector<absl::string_view> fields = absl::StrSplit(line_, options_.delimiter);
  const std::string where = absl::StrCat(files_[file_index_], ":", line_number_);
  const int64_t n = static_cast<int64_t>(fields.size());
  if (num_fields_ < 0) num_fields_ = n;
  if (n != num_fields_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", n, " fields, expected ", num_fields_, " (as on the first line)"));
  }
  const int64_t label =
      options_.label_column < 0 ? n + options_.label_column : options_.label_column;
  if (label < 0 || label >= n) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": label column ", options_.label_column,
                                                   " is outside the line's ", n, " fields"));
  }
  engine::Shape shape =
      options_.feature_shape.rank() == 0 ? engine::Shape{n - 1} : options_.feature_shape;
  if (shape.num_elements() != n - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", n - 1, " features do not fill feature_shape ", shape.ToString()));
  }
  engine::Tensor features(DType::kF32, shape);
  float* f = features.data<float>();
  double label_value = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::string field(absl::StripAsciiWhitespace(fields[i]));
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(field.c_str(), &end);
    if (field.empty() || end != field.c_str() + field.size() || errno == ERANGE) {
      // Line and field, never the text: a job's error is shown to whoever can read the
      // job, and the file may be one they may not read.
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": field ", i + 1, " (", field.size(), " bytes) is not a number"));
    }
    if (i == label) {
      label_value = v;
    } else {
      *f++ = static_cast<float>(v);
    }
  }
  if (options_.float_label) {
    out->labels = engine::Tensor::Scalar<float>(static_cast<float>(label_value));
  } else {
    // Checked before the cast: converting NaN, an infinity or a value outside int64's range
    // to int64 is undefined behaviour.
    if (!(label_value >= -0x1p63 && label_value < 0x1p63) ||
        label_value != std::trunc(label_value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the label (field ", label + 1, ") is not an integer class id"));
    }
    out->labels = engine::Tensor::Scalar<int64_t>(static_cast<int64_t>(label_value));
  }
  out->features = std::move(features);
  return absl::OkStatus();
}

absl::StatusOr<bool> CsvReader::Next(Element* out) {
  if (!error_.ok()) return error_;
  absl::StatusOr<bool> more = ReadLine();
  if (!more.ok()) {
    error_ = more.status();
    return error_;
  }
  if (!*more) return false;
  absl::Status parsed = ParseLine(out);
  if (!parsed.ok()) {
    error_ = parsed;
    return error_;
  }
  return true;
}

}  // namespace lockstep::data
