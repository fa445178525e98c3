#include "distribute/test_sources.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {
namespace {

class SliceIterator final : public BatchIterator {
 public:
  SliceIterator(std::vector<engine::Tensor> components, ShardSpec spec, int64_t batch_size)
      : components_(std::move(components)), spec_(std::move(spec)), batch_size_(batch_size) {}

  absl::StatusOr<std::optional<Batch>> Next() override {
    const int64_t n = components_[0].shape().dim(0);
    std::vector<int64_t> rows;
    while (next_ < n && static_cast<int64_t>(rows.size()) < batch_size_) {
      if (next_ % spec_.num_shards == spec_.shard_index) rows.push_back(next_);
      ++next_;
    }
    if (rows.empty()) return std::optional<Batch>();
    Batch batch;
    for (const engine::Tensor& c : components_) {
      std::vector<engine::Tensor> parts;
      for (int64_t r : rows) {
        absl::StatusOr<engine::Tensor> row = SliceAxis0(c, r, r + 1);
        if (!row.ok()) return row.status();
        parts.push_back(*row);
      }
      absl::StatusOr<engine::Tensor> joined = ConcatAxis0(parts);
      if (!joined.ok()) return joined.status();
      batch.push_back(*joined);
    }
    return std::optional<Batch>(std::move(batch));
  }

 private:
  std::vector<engine::Tensor> components_;
  ShardSpec spec_;
  int64_t batch_size_;
  int64_t next_ = 0;
};

}  // namespace

DatasetSource TensorSliceSource(std::vector<engine::Tensor> components) {
  DatasetSource source;
  source.make = [components](const ShardSpec& spec,
                             int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    return std::make_unique<SliceIterator>(components, spec, batch_size);
  };
  return source;
}

engine::Tensor Range(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return engine::Tensor::FromVector<int64_t>(v, engine::Shape{n});
}

DatasetSource LineFileSource(std::vector<std::string> files, std::shared_ptr<OpenedFiles> opened) {
  DatasetSource source;
  source.files = files;
  source.make = [opened](const ShardSpec& spec,
                         int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    std::vector<int64_t> values;
    for (const std::string& f : spec.files) {
      opened->Add(f);
      std::ifstream in(f);
      if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", f));
      int64_t v;
      while (in >> v) values.push_back(v);
    }
    engine::Tensor all = engine::Tensor::FromVector<int64_t>(
        values, engine::Shape{static_cast<int64_t>(values.size())});
    return std::make_unique<SliceIterator>(std::vector<engine::Tensor>{all}, spec, batch_size);
  };
  return source;
}

std::vector<std::vector<int64_t>> Drain(DistributedDataset& dataset) {
  std::vector<std::vector<int64_t>> out;
  while (true) {
    auto step = dataset.Next();
    if (!step.ok() || !step->has_value()) break;
    const DistributedValues& v = (**step)[0];
    out.resize(v.num_components());
    for (int r = 0; r < v.num_components(); ++r) {
      for (int64_t x : v.component(r).ToVector<int64_t>()) out[r].push_back(x);
    }
  }
  return out;
}

}  // namespace lockstep::distribute
