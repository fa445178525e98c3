// Batch sources for tests: an in-memory dataset (tf.data.Dataset.from_tensor_slices then
// shard then batch) and a reader of text files holding one integer per line (a stand-in
// for a file-based dataset, recording which files each worker opened). data/ provides the
// real pipelines. Thread model: a made iterator is used by one thread.
#ifndef LOCKSTEP_DISTRIBUTE_TEST_SOURCES_H_
#define LOCKSTEP_DISTRIBUTE_TEST_SOURCES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "distribute/distributed_dataset.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

// Element j is row j of every component (all have the same dimension 0).
DatasetSource TensorSliceSource(std::vector<engine::Tensor> components);

// range(n) as an i64 vector, for TensorSliceSource.
engine::Tensor Range(int64_t n);

// Files the sources made by LineFileSource opened, in order (thread-safe).
class OpenedFiles {
 public:
  void Add(const std::string& f) {
    absl::MutexLock lock(&mu_);
    files_.push_back(f);
  }
  std::vector<std::string> Get() {
    absl::MutexLock lock(&mu_);
    return files_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> files_ ABSL_GUARDED_BY(mu_);
};

// Reads `files` (one integer per line) in order as one i64 component.
DatasetSource LineFileSource(std::vector<std::string> files, std::shared_ptr<OpenedFiles> opened);

// Every element of a distributed dataset's steps, per local replica, as int64 values.
std::vector<std::vector<int64_t>> Drain(DistributedDataset& dataset);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_TEST_SOURCES_H_
