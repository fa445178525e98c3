#include "data/dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/prefetch_iterator.h"
#include "engine/philox.h"

namespace lockstep::data {

using MakeFn = std::function<std::unique_ptr<Iterator>(const Dataset::Node& input, uint64_t epoch)>;

class Dataset::Node {
 public:
  virtual ~Node() = default;
  virtual std::unique_ptr<Iterator> Make(uint64_t epoch) const = 0;
  // The same chain over files index, index + n, ... of the source.
  virtual std::shared_ptr<const Node> WithFileShard(int n, int index) const = 0;
  virtual int num_files() const = 0;
  // The first error in the chain up to this node.
  absl::Status error;
};

namespace {

// The end (or an error) forever after.
class ErrorIterator final : public Iterator {
 public:
  explicit ErrorIterator(absl::Status s) : s_(std::move(s)) {}
  absl::StatusOr<bool> Next(Element*) override {
    if (!s_.ok()) return s_;
    return false;
  }

 private:
  absl::Status s_;
};

// Yields the rows of in-memory tensors, one example each.
class TensorSliceIterator final : public Iterator {
 public:
  explicit TensorSliceIterator(Element all) : all_(std::move(all)) {}
  absl::StatusOr<bool> Next(Element* out) override {
    if (next_ >= all_.features.shape().dim(0)) return false;
    *out = Slice(all_, next_++);
    return true;
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    const int64_t skipped = std::min(n, all_.features.shape().dim(0) - next_);
    next_ += skipped;
    return skipped;
  }

 private:
  Element all_;
  int64_t next_ = 0;
};

// Generates example i from (seed, i) alone: skipping is free.
class SyntheticIterator final : public Iterator {
 public:
  SyntheticIterator(int64_t n, engine::Shape shape, int classes, uint64_t seed)
      : n_(n),
        shape_(std::move(shape)),
        classes_(classes),
        features_(engine::MixKey(seed, engine::HashName("synthetic/features"))),
        labels_(engine::MixKey(seed, engine::HashName("synthetic/labels"))) {}
  absl::StatusOr<bool> Next(Element* out) override {
    if (next_ >= n_) return false;
    engine::Tensor f(DType::kF32, shape_);
    const int64_t width = f.num_elements();
    for (int64_t j = 0; j < width; ++j) {
      f.data<float>()[j] = static_cast<float>(features_.Uniform(next_ * width + j));
    }
    out->features = std::move(f);
    out->labels = engine::Tensor::Scalar<int64_t>(
        static_cast<int64_t>(labels_.Uniform(next_) * classes_) % classes_);
    ++next_;
    return true;
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    const int64_t skipped = std::min(n, n_ - next_);
    next_ += skipped;
    return skipped;
  }

 private:
  const int64_t n_;
  const engine::Shape shape_;
  const int classes_;
  const engine::Philox features_, labels_;
  int64_t next_ = 0;
};

// A source: in-memory tensors, or a list of files read by a reader.
class SourceNode final : public Dataset::Node {
 public:
  using ReaderFn = std::function<std::unique_ptr<Iterator>(const std::vector<std::string>&)>;
  SourceNode(std::vector<std::string> files, ReaderFn reader, Element tensors)
      : files_(std::move(files)), reader_(std::move(reader)), tensors_(std::move(tensors)) {}

  std::unique_ptr<Iterator> Make(uint64_t) const override {
    if (!error.ok()) return std::make_unique<ErrorIterator>(error);
    if (reader_) return reader_(files_);
    return std::make_unique<TensorSliceIterator>(tensors_);
  }
  std::shared_ptr<const Node> WithFileShard(int n, int index) const override {
    auto shard = std::make_shared<SourceNode>(std::vector<std::string>{}, reader_, tensors_);
    shard->error = error;
    if (!reader_) {
      shard->error = absl::FailedPreconditionError(
          "FILE sharding: the dataset reads no files (it is built from tensors); shard by DATA");
    } else if (static_cast<int>(files_.size()) < n) {
      shard->error = absl::FailedPreconditionError(
          absl::StrCat("FILE sharding: ", files_.size(), " files cannot feed ", n,
                       " workers; give at least one file per worker or shard by DATA"));
    }
    for (size_t f = index; f < files_.size(); f += n) shard->files_.push_back(files_[f]);
    return shard;
  }
  int num_files() const override { return static_cast<int>(files_.size()); }

 private:
  std::vector<std::string> files_;
  ReaderFn reader_;
  Element tensors_;
};

// A transformation over an input node; `make` builds its iterator.
class TransformNode final : public Dataset::Node {
 public:
  TransformNode(std::shared_ptr<const Node> input, MakeFn make, absl::Status own_error)
      : input_(std::move(input)), make_(std::move(make)), own_error_(own_error) {
    error = input_->error.ok() ? own_error_ : input_->error;
  }
  std::unique_ptr<Iterator> Make(uint64_t epoch) const override {
    if (!error.ok()) return std::make_unique<ErrorIterator>(error);
    return make_(*input_, epoch);
  }
  std::shared_ptr<const Node> WithFileShard(int n, int index) const override {
    return std::make_shared<TransformNode>(input_->WithFileShard(n, index), make_, own_error_);
  }
  int num_files() const override { return input_->num_files(); }

 private:
  std::shared_ptr<const Node> input_;
  MakeFn make_;
  absl::Status own_error_;
};

// tf.data's shuffle: fills a buffer, then emits a Philox-chosen element and refills.
class ShuffleIterator final : public Iterator {
 public:
  ShuffleIterator(std::unique_ptr<Iterator> in, int64_t buffer_size, uint64_t key)
      : in_(std::move(in)), buffer_size_(buffer_size), rng_(key) {}
  absl::StatusOr<bool> Next(Element* out) override {
    while (!in_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
      Element e;
      absl::StatusOr<bool> more = in_->Next(&e);
      if (!more.ok()) return more;
      if (!*more) {
        in_done_ = true;
        break;
      }
      buffer_.push_back(std::move(e));
    }
    if (buffer_.empty()) return false;
    engine::Philox::Block b = rng_.Generate(counter_++);
    uint64_t r = (static_cast<uint64_t>(b[0]) << 32) | b[1];
    size_t pick = r % buffer_.size();
    *out = std::move(buffer_[pick]);
    buffer_[pick] = std::move(buffer_.back());
    buffer_.pop_back();
    return true;
  }

 private:
  std::unique_ptr<Iterator> in_;
  const int64_t buffer_size_;
  const engine::Philox rng_;
  uint64_t counter_ = 0;
  bool in_done_ = false;
  std::vector<Element> buffer_;
};

// Stacks up to `size` consecutive elements.
class BatchIterator final : public Iterator {
 public:
  BatchIterator(std::unique_ptr<Iterator> in, int64_t size, bool drop_remainder)
      : in_(std::move(in)), size_(size), drop_remainder_(drop_remainder) {}
  absl::StatusOr<bool> Next(Element* out) override {
    std::vector<Element> items;
    while (static_cast<int64_t>(items.size()) < size_) {
      Element e;
      absl::StatusOr<bool> more = in_->Next(&e);
      if (!more.ok()) return more;
      if (!*more) break;
      items.push_back(std::move(e));
    }
    if (items.empty() || (drop_remainder_ && static_cast<int64_t>(items.size()) < size_))
      return false;
    absl::StatusOr<Element> batch = Stack(items);
    if (!batch.ok()) return batch.status();
    *out = *std::move(batch);
    return true;
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    absl::StatusOr<int64_t> rows = in_->Skip(n * size_);
    if (!rows.ok()) return rows;
    const int64_t full = *rows / size_;
    return full + (!drop_remainder_ && *rows % size_ != 0 ? 1 : 0);
  }

 private:
  std::unique_ptr<Iterator> in_;
  const int64_t size_;
  const bool drop_remainder_;
};

// Re-makes its input once per pass, passing the pass number on as the epoch.
class RepeatIterator final : public Iterator {
 public:
  RepeatIterator(const Dataset::Node& input, int64_t count, uint64_t epoch)
      : input_(input), count_(count), epoch_(epoch) {}
  absl::StatusOr<bool> Next(Element* out) override {
    while (count_ < 0 || pass_ < count_) {
      if (in_ == nullptr) {
        in_ = input_.Make(engine::MixKey(epoch_, pass_));
        produced_in_pass_ = 0;
      }
      absl::StatusOr<bool> more = in_->Next(out);
      if (!more.ok()) return more;
      if (*more) {
        ++produced_in_pass_;
        return true;
      }
      if (produced_in_pass_ > 0) pass_length_ = produced_in_pass_;
      in_.reset();
      ++pass_;
      if (produced_in_pass_ == 0) return false;  // an empty pass: repeating cannot help
    }
    return false;
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    int64_t skipped = 0;
    while (skipped < n && (count_ < 0 || pass_ < count_)) {
      if (in_ == nullptr && pass_length_ > 0) {
        // Whole passes are skipped without being made once one pass was seen to its end:
        // every pass reads the same data, so each yields as many elements (in another
        // order). Resuming a long job's input is then O(one pass), not O(its steps).
        int64_t passes = (n - skipped) / pass_length_;
        if (count_ >= 0) passes = std::min(passes, count_ - pass_);
        if (passes > 0) {
          pass_ += passes;
          skipped += passes * pass_length_;
          continue;
        }
      }
      if (in_ == nullptr) {
        in_ = input_.Make(engine::MixKey(epoch_, pass_));
        produced_in_pass_ = 0;
      }
      absl::StatusOr<int64_t> s = in_->Skip(n - skipped);
      if (!s.ok()) return s;
      skipped += *s;
      produced_in_pass_ += *s;
      if (skipped == n) break;
      if (produced_in_pass_ > 0) pass_length_ = produced_in_pass_;
      in_.reset();  // this pass ended
      ++pass_;
      if (produced_in_pass_ == 0) break;
    }
    return skipped;
  }

 private:
  const Dataset::Node& input_;  // the node outlives its iterators (the Dataset holds it)
  const int64_t count_;
  const uint64_t epoch_;
  int64_t pass_ = 0;
  int64_t produced_in_pass_ = 0;
  int64_t pass_length_ = 0;  // elements of a whole pass, once one ended (0: not known yet)
  std::unique_ptr<Iterator> in_;
};

// Shard, Take, Skip: keep element i when keep(i); stop when stop(i).
class FilterIterator final : public Iterator {
 public:
  FilterIterator(std::unique_ptr<Iterator> in, std::function<bool(int64_t)> keep,
                 std::function<bool(int64_t)> stop)
      : in_(std::move(in)), keep_(std::move(keep)), stop_(std::move(stop)) {}
  absl::StatusOr<bool> Next(Element* out) override {
    while (true) {
      if (stop_(index_)) return false;
      absl::StatusOr<bool> more = in_->Next(out);
      if (!more.ok() || !*more) return more;
      if (keep_(index_++)) return true;
    }
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    int64_t skipped = 0;
    while (skipped < n && !stop_(index_)) {
      absl::StatusOr<int64_t> s = in_->Skip(1);
      if (!s.ok()) return s;
      if (*s == 0) break;
      if (keep_(index_++)) ++skipped;
    }
    return skipped;
  }

 private:
  std::unique_ptr<Iterator> in_;
  std::function<bool(int64_t)> keep_, stop_;
  int64_t index_ = 0;
};

// Applies a function to every element.
class MapIterator final : public Iterator {
 public:
  MapIterator(std::unique_ptr<Iterator> in, std::function<absl::Status(Element*)> fn)
      : in_(std::move(in)), fn_(std::move(fn)) {}
  absl::StatusOr<bool> Next(Element* out) override {
    absl::StatusOr<bool> more = in_->Next(out);
    if (!more.ok() || !*more) return more;
    absl::Status s = fn_(out);
    if (!s.ok()) return s;
    return true;
  }
  // Mapping is per element: skipped elements need not be mapped.
  absl::StatusOr<int64_t> Skip(int64_t n) override { return in_->Skip(n); }

 private:
  std::unique_ptr<Iterator> in_;
  std::function<absl::Status(Element*)> fn_;
};

}  // namespace

absl::StatusOr<bool> DatasetIterator::Next(Element* out) {
  absl::StatusOr<bool> more = impl_->Next(out);
  if (more.ok() && *more) ++position_;
  return more;
}

absl::Status DatasetIterator::SkipTo(int64_t position) {
  if (position <= position_) return absl::OkStatus();
  absl::StatusOr<int64_t> skipped = impl_->Skip(position - position_);
  if (!skipped.ok()) return skipped.status();
  position_ += *skipped;
  if (position_ < position) {
    return absl::OutOfRangeError(
        absl::StrCat("restoring the data position: the dataset ends after ", position_,
                     " elements, before position ", position));
  }
  return absl::OkStatus();
}

Dataset Dataset::FromTensors(engine::Tensor features, engine::Tensor labels) {
  auto node =
      std::make_shared<SourceNode>(std::vector<std::string>{}, nullptr, Element{features, labels});
  if (!features.valid() || !labels.valid() || features.shape().rank() < 1 ||
      labels.shape().rank() < 1 || features.shape().dim(0) != labels.shape().dim(0)) {
    node->error = absl::InvalidArgumentError(
        absl::StrCat("FromTensors: features ", features.valid() ? features.DebugString() : "(none)",
                     " and labels ", labels.valid() ? labels.DebugString() : "(none)",
                     " need the same first dimension"));
  }
  return Dataset(node);
}

Dataset Dataset::Synthetic(int64_t num_examples, engine::Shape feature_shape, int num_classes,
                           uint64_t seed) {
  // Files are not involved: the "reader" ignores its (empty) file list.
  auto node = std::make_shared<SourceNode>(
      std::vector<std::string>{},
      [=](const std::vector<std::string>&) {
        return std::make_unique<SyntheticIterator>(num_examples, feature_shape, num_classes, seed);
      },
      Element{});
  if (num_examples < 0 || num_classes < 1 || !feature_shape.fully_known()) {
    node->error = absl::InvalidArgumentError(absl::StrCat(
        "Synthetic: num_examples ", num_examples, " must be >= 0, num_classes ", num_classes,
        " >= 1, feature_shape ", feature_shape.ToString(), " fully known"));
  }
  return Dataset(node);
}

namespace {

// A source that a `Reader` (constructed from the files and `options`) reads from `files`;
// invalid with "<name>: no files given", or with `invalid` (the options' check).
template <typename Reader, typename Options>
std::shared_ptr<const Dataset::Node> FilesNode(absl::string_view name,
                                               std::vector<std::string> files, Options options,
                                               absl::Status invalid) {
  auto node = std::make_shared<SourceNode>(
      files,
      [options](const std::vector<std::string>& f) -> std::unique_ptr<Iterator> {
        return std::make_unique<Reader>(f, options);
      },
      Element{});
  node->error = files.empty() ? absl::InvalidArgumentError(absl::StrCat(name, ": no files given"))
                              : std::move(invalid);
  return node;
}

}  // namespace

Dataset Dataset::Csv(std::vector<std::string> files, CsvOptions options) {
  return Dataset(
      FilesNode<CsvReader>("Csv", std::move(files), std::move(options), absl::OkStatus()));
}

Dataset Dataset::FixedRecords(std::vector<std::string> files, RecordOptions options) {
  absl::Status invalid = FixedRecordReader::Validate(options);
  return Dataset(FilesNode<FixedRecordReader>("FixedRecords", std::move(files), std::move(options),
                                              std::move(invalid)));
}

Dataset Dataset::TfRecord(std::vector<std::string> files, ExampleOptions options) {
  absl::Status invalid = ExampleReader::Validate(options);
  return Dataset(FilesNode<ExampleReader>("TfRecord", std::move(files), std::move(options),
                                          std::move(invalid)));
}

Dataset Dataset::Then(MakeFn make, absl::Status error) const {
  return Dataset(std::make_shared<TransformNode>(node_, std::move(make), std::move(error)));
}

Dataset Dataset::Shuffle(int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration) const {
  return Then(
      [=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
        uint64_t key = engine::MixKey(seed, reshuffle_each_iteration ? epoch : 0);
        return std::make_unique<ShuffleIterator>(in.Make(epoch), buffer_size, key);
      },
      buffer_size > 0 ? absl::OkStatus()
                      : absl::InvalidArgumentError(
                            absl::StrCat("Shuffle: buffer_size ", buffer_size, " must be > 0")));
}

Dataset Dataset::Batch(int64_t batch_size, bool drop_remainder) const {
  return Then(
      [=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
        return std::make_unique<BatchIterator>(in.Make(epoch), batch_size, drop_remainder);
      },
      batch_size > 0 ? absl::OkStatus()
                     : absl::InvalidArgumentError(
                           absl::StrCat("Batch: batch_size ", batch_size, " must be > 0")));
}

Dataset Dataset::Repeat(int64_t count) const {
  return Then([=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<RepeatIterator>(in, count, epoch);
  });
}

Dataset Dataset::Shard(int num_shards, int index) const {
  absl::Status error;
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    error = absl::InvalidArgumentError(
        absl::StrCat("Shard: index ", index, " is not in [0, ", num_shards, ")"));
  }
  return Then(
      [=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
        return std::make_unique<FilterIterator>(
            in.Make(epoch), [=](int64_t i) { return i % num_shards == index; },
            [](int64_t) { return false; });
      },
      error);
}

Dataset Dataset::ShardFiles(int num_shards, int index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return Then(nullptr, absl::InvalidArgumentError(absl::StrCat(
                             "ShardFiles: index ", index, " is not in [0, ", num_shards, ")")));
  }
  return Dataset(node_->WithFileShard(num_shards, index));
}

Dataset Dataset::Take(int64_t count) const {
  return Then([=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<FilterIterator>(
        in.Make(epoch), [](int64_t) { return true; },
        [=](int64_t i) { return count >= 0 && i >= count; });
  });
}

Dataset Dataset::Skip(int64_t count) const {
  return Then([=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<FilterIterator>(
        in.Make(epoch), [=](int64_t i) { return i >= count; }, [](int64_t) { return false; });
  });
}

Dataset Dataset::Map(std::function<absl::Status(Element*)> fn) const {
  return Then([fn](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<MapIterator>(in.Make(epoch), fn);
  });
}

Dataset Dataset::Normalize(std::vector<float> mean, std::vector<float> stddev) const {
  absl::Status error;
  if (mean.empty() || mean.size() != stddev.size()) {
    error =
        absl::InvalidArgumentError(absl::StrCat("Normalize: ", mean.size(), " means and ",
                                                stddev.size(), " stddevs; give as many of each"));
  }
  for (float s : stddev) {
    if (!(s > 0)) error = absl::InvalidArgumentError("Normalize: every stddev must be > 0");
  }
  Dataset mapped = Map([mean, stddev](Element* e) -> absl::Status {
    engine::Tensor& f = e->features;
    const int64_t width = f.shape().rank() == 0 ? 1 : f.shape()[-1];
    if (mean.size() != 1 && static_cast<int64_t>(mean.size()) != width) {
      return absl::InvalidArgumentError(
          absl::StrCat("Normalize: ", mean.size(), " means for features ", f.DebugString()));
    }
    engine::Tensor out(DType::kF32, f.shape());  // never write a shared buffer
    const float* x = f.data<float>();
    float* y = out.data<float>();
    for (int64_t i = 0; i < f.num_elements(); ++i) {
      size_t j = mean.size() == 1 ? 0 : i % width;
      y[i] = (x[i] - mean[j]) / stddev[j];
    }
    f = std::move(out);
    return absl::OkStatus();
  });
  return error.ok() ? mapped : Then(nullptr, error);
}

Dataset Dataset::Prefetch(int buffer_size) const {
  return Then([=](const Node& in, uint64_t epoch) -> std::unique_ptr<Iterator> {
    return std::make_unique<PrefetchIterator>(in.Make(epoch), buffer_size);
  });
}

absl::Status Dataset::status() const { return node_->error; }

int Dataset::num_files() const { return node_->num_files(); }

absl::StatusOr<std::unique_ptr<DatasetIterator>> Dataset::MakeIterator(int64_t position) const {
  if (!node_->error.ok()) return node_->error;
  auto it = std::make_unique<DatasetIterator>(node_, node_->Make(0));
  LS_RETURN_IF_ERROR(it->SkipTo(position));
  return it;
}

}  // namespace lockstep::data
