// ExampleReader: reads examples from TFRecord files (common/tfrecord.h) whose records are
// tf.train.Example protos (proto/lockstep/v1/example.proto, TensorFlow's wire format), files
// in the order given. ExampleOptions names the features that make the model's input and the
// one that is the label, with their kinds and shapes.
//
// Features become one f32 tensor: a single feature keeps its shape ([1] for a scalar);
// several are concatenated, flattened, in order ([total values]). An INT64 input feature is
// converted to f32. The label is one value (shape [] or [1]: an INT64 feature gives an i64
// class id, a FLOAT feature an f32 target) or a tensor of its shape, e.g. [t] class ids, one
// per position of a sequence (a language model's next tokens).
//
// Errors: a corrupt record (CRC, truncation) is DATA_LOSS naming the file and the record's
// byte offset; a record that is not an Example, or that lacks a feature, holds another kind
// of list or the wrong number of values is INVALID_ARGUMENT naming the file, the record's
// index in it (from 0), its offset and the feature. Messages never quote the file's bytes.
// Thread model: one thread at a time.
#ifndef LOCKSTEP_DATA_EXAMPLE_READER_H_
#define LOCKSTEP_DATA_EXAMPLE_READER_H_

#include <optional>
#include <string>
#include <vector>

#include "common/tfrecord.h"
#include "data/iterator.h"
#include "engine/shape.h"
#include "lockstep/v1/example.pb.h"

namespace lockstep::data {

struct ExampleFeature {
  enum class Kind { kFloat, kInt64 };  // float_list, int64_list
  std::string name;                    // key in Example.features.feature
  engine::Shape shape;                 // values per example; rank 0: one value
  Kind kind = Kind::kFloat;
};

struct ExampleOptions {
  std::vector<ExampleFeature> features;  // at least one
  ExampleFeature label;                  // one value (shape [] or [1]) or a tensor
};

class ExampleReader final : public Iterator {
 public:
  ExampleReader(std::vector<std::string> files, ExampleOptions options);
  absl::StatusOr<bool> Next(Element* out) override;
  // Reads past records without parsing them (a restored data position).
  absl::StatusOr<int64_t> Skip(int64_t n) override;

  // INVALID_ARGUMENT naming the feature for options that cannot describe an example: no
  // features, an empty name, a dimension < 1.
  static absl::Status Validate(const ExampleOptions& options);
  // The shape of one example's features tensor.
  static engine::Shape FeatureShape(const ExampleOptions& options);

 private:
  // The next record of the files, in *record; false after the last file.
  absl::StatusOr<bool> NextRecord(std::string* record);
  absl::Status Parse(const std::string& record, Element* out);

  const std::vector<std::string> files_;
  const ExampleOptions options_;
  const engine::Shape feature_shape_;
  size_t file_index_ = 0;
  std::optional<TfRecordReader> reader_;  // of files_[file_index_] while it is read
  int64_t record_index_ = -1;             // in the current file: the last record read
  uint64_t record_offset_ = 0;            // its byte offset
  v1::Example example_;                   // reused, to keep its allocations
  absl::Status error_;
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_EXAMPLE_READER_H_
