// FixedRecordReader: reads examples from files of fixed-size binary records (after an
// optional header), like CIFAR's or MNIST's files: each record holds a label and a run of
// features at fixed offsets. Features become f32, labels i64. A file whose size does not
// fit whole records is refused naming the file. Thread model: one thread at a time.
#ifndef LOCKSTEP_DATA_RECORD_READER_H_
#define LOCKSTEP_DATA_RECORD_READER_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/iterator.h"
#include "engine/shape.h"

namespace lockstep::data {

struct RecordOptions {
  enum class Type { kU8, kF32 };  // f32 is little-endian
  int64_t header_bytes = 0;       // skipped at the start of every file
  int64_t record_bytes = 0;
  int64_t label_offset = 0;  // label: one unsigned byte at this offset of a record
  int64_t feature_offset = 1;
  int64_t num_features = 0;
  Type feature_type = Type::kU8;
  engine::Shape feature_shape;  // default [num_features]
};

class FixedRecordReader final : public Iterator {
 public:
  FixedRecordReader(std::vector<std::string> files, RecordOptions options);
  ~FixedRecordReader() override;
  absl::StatusOr<bool> Next(Element* out) override;
  // INVALID_ARGUMENT when the fields do not fit in record_bytes.
  static absl::Status Validate(const RecordOptions& options);

 private:
  absl::Status OpenNext();

  const std::vector<std::string> files_;
  const RecordOptions options_;
  size_t file_index_ = 0;
  std::FILE* file_ = nullptr;
  int64_t record_index_ = 0;
  std::vector<unsigned char> record_;
  absl::Status error_;
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_RECORD_READER_H_
