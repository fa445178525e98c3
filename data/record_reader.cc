#include "data/record_reader.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::data {

FixedRecordReader::FixedRecordReader(std::vector<std::string> files, RecordOptions options)
    : files_(std::move(files)), options_(std::move(options)), record_(options_.record_bytes) {}

FixedRecordReader::~FixedRecordReader() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status FixedRecordReader::Validate(const RecordOptions& o) {
  const int64_t feature_bytes =
      o.num_features * (o.feature_type == RecordOptions::Type::kU8 ? 1 : 4);
  if (o.record_bytes <= 0 || o.header_bytes < 0 || o.num_features <= 0) {
    return absl::InvalidArgumentError(
        "fixed records: record_bytes and num_features must be > 0, header_bytes >= 0");
  }
  if (o.label_offset < 0 || o.label_offset >= o.record_bytes || o.feature_offset < 0 ||
      o.feature_offset + feature_bytes > o.record_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("fixed records: the label (offset ", o.label_offset, ") or the ",
                     feature_bytes, " feature bytes (offset ", o.feature_offset,
                     ") do not fit in record_bytes ", o.record_bytes));
  }
  if (o.feature_shape.rank() > 0 && o.feature_shape.num_elements() != o.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("fixed records: feature_shape ",
                                                   o.feature_shape.ToString(), " does not hold ",
                                                   o.num_features, " features"));
  }
  return absl::OkStatus();
}

absl::Status FixedRecordReader::OpenNext() {
  const std::string& name = files_[file_index_];
  file_ = std::fopen(name.c_str(), "rb");
  if (file_ == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open record file ", name, ": ", std::strerror(errno)));
  }
  std::fseek(file_, 0, SEEK_END);
  const int64_t size = std::ftell(file_);
  if (size < options_.header_bytes || (size - options_.header_bytes) % options_.record_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("record file ", name, ": ", size, " bytes are not a ", options_.header_bytes,
                     "-byte header plus whole ", options_.record_bytes, "-byte records"));
  }
  std::fseek(file_, options_.header_bytes, SEEK_SET);
  record_index_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<bool> FixedRecordReader::Next(Element* out) {
  if (!error_.ok()) return error_;
  if (error_ = Validate(options_); !error_.ok()) return error_;
  while (file_index_ < files_.size()) {
    if (file_ == nullptr) {
      if (error_ = OpenNext(); !error_.ok()) return error_;
    }
    if (std::fread(record_.data(), 1, record_.size(), file_) == record_.size()) {
      ++record_index_;
      engine::Shape shape = options_.feature_shape.rank() > 0
                                ? options_.feature_shape
                                : engine::Shape{options_.num_features};
      engine::Tensor features(DType::kF32, shape);
      float* f = features.data<float>();
      const unsigned char* src = record_.data() + options_.feature_offset;
      for (int64_t i = 0; i < options_.num_features; ++i) {
        if (options_.feature_type == RecordOptions::Type::kU8) {
          f[i] = static_cast<float>(src[i]);
        } else {
          std::memcpy(&f[i], src + 4 * i, 4);
        }
      }
      out->features = std::move(features);
      out->labels = engine::Tensor::Scalar<int64_t>(record_[options_.label_offset]);
      return true;
    }
    if (std::ferror(file_)) {
      error_ = absl::DataLossError(
          absl::StrCat("reading record file ", files_[file_index_], " at record ", record_index_));
      return error_;
    }
    std::fclose(file_);
    file_ = nullptr;
    ++file_index_;
  }
  return false;
}

}  // namespace lockstep::data
