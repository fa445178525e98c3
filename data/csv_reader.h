// CsvReader: reads examples from CSV files (plain, or gzip when the name ends in .gz), one
// example per line, files in the order given. Every field but the label is a feature
// (f32); the label is an integer class id (i64) or, with float_label, an f32 target.
// Parse errors name the file, line and field. Thread model: one thread at a time.
#ifndef LOCKSTEP_DATA_CSV_READER_H_
#define LOCKSTEP_DATA_CSV_READER_H_

#include <memory>
#include <string>
#include <vector>

#include "data/iterator.h"
#include "engine/shape.h"

namespace lockstep::data {

struct CsvOptions {
  int label_column = -1;  // index of the label field; negative counts from the end
  bool header = false;    // skip the first line of every file
  char delimiter = ',';
  bool float_label = false;
  // Shape of one example's features, e.g. {8, 8, 1}; empty means [number of features].
  engine::Shape feature_shape;
};

class CsvReader final : public Iterator {
 public:
  CsvReader(std::vector<std::string> files, CsvOptions options);
  ~CsvReader() override;
  absl::StatusOr<bool> Next(Element* out) override;

 private:
  // Reads one line of the current file into line_; false at the end of all files.
  absl::StatusOr<bool> ReadLine();
  absl::Status ParseLine(Element* out);

  const std::vector<std::string> files_;
  const CsvOptions options_;
  size_t file_index_ = 0;
  void* gz_ = nullptr;  // gzFile of the open file (zlib reads plain files too)
  int64_t line_number_ = 0;
  std::string line_;
  int64_t num_fields_ = -1;  // fields per line, from the first line of the first file
  absl::Status error_;
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_CSV_READER_H_
