#include "distribute/data_source.h"

#include "common/status.h"

namespace lockstep::distribute {
namespace {

class DataBatchIterator final : public BatchIterator {
 public:
  explicit DataBatchIterator(std::unique_ptr<data::DatasetIterator> it) : it_(std::move(it)) {}
  absl::StatusOr<std::optional<Batch>> Next() override {
    data::Element e;
    LS_ASSIGN_OR_RETURN(bool more, it_->Next(&e));
    if (!more) return std::optional<Batch>();
    return std::optional<Batch>(Batch{e.features, e.labels});
  }
  absl::StatusOr<int64_t> Skip(int64_t n) override {
    const int64_t from = it_->position();
    absl::Status s = it_->SkipTo(from + n);
    if (!s.ok() && !absl::IsOutOfRange(s)) return s;
    return it_->position() - from;  // fewer at the end of the data
  }

 private:
  std::unique_ptr<data::DatasetIterator> it_;
};

}  // namespace

std::unique_ptr<BatchIterator> AsBatchIterator(std::unique_ptr<data::DatasetIterator> batches) {
  return std::make_unique<DataBatchIterator>(std::move(batches));
}

DatasetSource DataDatasetSource(data::Dataset examples, bool drop_remainder) {
  DatasetSource source;
  source.num_files = examples.num_files();
  source.make = [examples, drop_remainder](
                    const ShardSpec& spec,
                    int64_t batch_size) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    data::Dataset ds = examples;
    if (spec.num_file_shards > 1) ds = ds.ShardFiles(spec.num_file_shards, spec.file_shard_index);
    if (spec.num_shards > 1) ds = ds.Shard(spec.num_shards, spec.shard_index);
    ds = ds.Batch(batch_size, drop_remainder);
    LS_ASSIGN_OR_RETURN(std::unique_ptr<data::DatasetIterator> it, ds.MakeIterator());
    return AsBatchIterator(std::move(it));
  };
  return source;
}

}  // namespace lockstep::distribute
