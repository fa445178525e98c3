// Dataset: an input pipeline in the style of tf.data. A Dataset is an immutable, cheaply
// copied description (a chain of shared nodes: a source, then transformations); iterating
// it makes an Iterator. Every transformation is deterministic for a given seed, so a
// pipeline yields the same elements in the same order on every run and machine.
//
//   auto ds = Dataset::Csv({"train.csv"}, {.label_column = -1})
//                 .Shard(num_workers, worker_index)
//                 .Shuffle(/*buffer_size=*/1024, /*seed=*/7)
//                 .Normalize({0.0f}, {16.0f})
//                 .Batch(32, /*drop_remainder=*/true)
//                 .Repeat()
//                 .Prefetch(2);
//   LS_ASSIGN_OR_RETURN(auto it, ds.MakeIterator());
//   Element batch;  // features [32, ...] f32, labels [32] i64
//   while (true) { LS_ASSIGN_OR_RETURN(bool more, it->Next(&batch)); if (!more) break; ... }
//
// Errors: a transformation given bad arguments (batch size 0, shard index out of range)
// makes a Dataset whose status() is INVALID_ARGUMENT; MakeIterator returns it. Read errors
// (missing file, a bad number) come from Next, naming the file and line.
//
// Data position (checkpoints): Iterator::position() counts the elements it returned;
// MakeIterator(position) makes an iterator that continues from there (it replays the
// pipeline deterministically, skipping that many elements; readers, shuffle buffers and
// prefetch still run, while batching, mapping and in-memory sources skip cheaply).
//
// FILE auto-sharding: num_files() says how many source files the pipeline reads;
// ShardFiles(n, i) rebuilds the same pipeline over files i, i+n, i+2n, ...
//
// Thread model: a Dataset is immutable and may be shared between threads; an Iterator is
// used by one thread at a time (Prefetch runs its upstream on its own thread).
#ifndef LOCKSTEP_DATA_DATASET_H_
#define LOCKSTEP_DATA_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/csv_reader.h"
#include "data/element.h"
#include "data/example_reader.h"
#include "data/iterator.h"
#include "data/record_reader.h"

namespace lockstep::data {

// The iterator a Dataset hands out: counts what it returned (the data position).
class DatasetIterator {
 public:
  // `owner` keeps the pipeline the iterator reads alive.
  DatasetIterator(std::shared_ptr<const void> owner, std::unique_ptr<Iterator> impl)
      : owner_(std::move(owner)), impl_(std::move(impl)) {}
  absl::StatusOr<bool> Next(Element* out);
  int64_t position() const { return position_; }
  // Moves forward to `position` (no-op if already there or past it), skipping elements
  // without building them where the stages allow. OUT_OF_RANGE if the data ends first.
  absl::Status SkipTo(int64_t position);

 private:
  std::shared_ptr<const void> owner_;  // destroyed after impl_
  std::unique_ptr<Iterator> impl_;
  int64_t position_ = 0;
};

class Dataset {
 public:
  // A pipeline node: makes an iterator over its elements for `epoch` (Repeat's count,
  // which reshuffling draws on). Implementations live in dataset.cc and the readers.
  class Node;

  // In-memory examples: features [n, ...] (f32) and labels [n] (i64 or f32), sliced
  // along the first axis.
  static Dataset FromTensors(engine::Tensor features, engine::Tensor labels);
  // `num_examples` generated examples (benchmarks, smoke tests): features uniform in
  // [0, 1) of `feature_shape`, labels uniform in [0, num_classes), all from Philox keyed by
  // `seed`, so every worker generates the same data. No files; nothing kept in memory.
  static Dataset Synthetic(int64_t num_examples, engine::Shape feature_shape, int num_classes,
                           uint64_t seed);
  // CSV files (plain or .gz), one example per line, read in order.
  static Dataset Csv(std::vector<std::string> files, CsvOptions options = {});
  // Files of fixed-size binary records.
  static Dataset FixedRecords(std::vector<std::string> files, RecordOptions options);
  // TFRecord files of tf.train.Example protos, read in order (data/example_reader.h).
  static Dataset TfRecord(std::vector<std::string> files, ExampleOptions options);

  // tf.data's shuffle: a buffer of `buffer_size` elements, each output drawn uniformly
  // from it. With reshuffle_each_iteration, each Repeat epoch uses another order.
  Dataset Shuffle(int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration = true) const;
  // Stacks `batch_size` consecutive elements; the last smaller batch is kept unless
  // drop_remainder.
  Dataset Batch(int64_t batch_size, bool drop_remainder) const;
  // `count` passes over the data; -1 repeats forever.
  Dataset Repeat(int64_t count = -1) const;
  // Every num_shards-th element starting at `index` (the DATA auto-shard policy).
  Dataset Shard(int num_shards, int index) const;
  // Only files index, index + num_shards, ... of the source (the FILE auto-shard policy).
  // Invalid (FAILED_PRECONDITION) when there are fewer files than shards.
  Dataset ShardFiles(int num_shards, int index) const;
  Dataset Take(int64_t count) const;
  Dataset Skip(int64_t count) const;
  // Applies fn to every element; its error ends the iteration with that error.
  Dataset Map(std::function<absl::Status(Element*)> fn) const;
  // features = (features - mean) / stddev, per feature (vectors the size of the last
  // feature axis) or for all features (vectors of size 1).
  Dataset Normalize(std::vector<float> mean, std::vector<float> stddev) const;
  // Runs the pipeline above on a background thread, keeping up to buffer_size elements ready.
  Dataset Prefetch(int buffer_size = 2) const;

  absl::Status status() const;
  // Source files read by this pipeline (0 for FromTensors).
  int num_files() const;
  // INVALID_ARGUMENT / FAILED_PRECONDITION as status(); starts at `position` elements in.
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator(int64_t position = 0) const;

 private:
  explicit Dataset(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  Dataset Then(std::function<std::unique_ptr<Iterator>(const Node& input, uint64_t epoch)> make,
               absl::Status error = absl::OkStatus()) const;

  std::shared_ptr<const Node> node_;
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_DATASET_H_
