// FileStore: a rendezvous Store in a directory, for processes of one host (the benchmark
// driver and the multi-process tests); the cluster uses the coordinator-backed Store.
//
// Set writes a temporary file and renames it to the key's name (atomic, write-once through
// link(2)); Get polls for the file with a short back-off until the deadline. Keys may hold
// any characters: file names are the key's hex encoding. Does not own the directory.
// Thread model: thread-safe; Abort() makes pending and later calls return ABORTED.
#ifndef LOCKSTEP_COLLECTIVES_FILE_STORE_H_
#define LOCKSTEP_COLLECTIVES_FILE_STORE_H_

#include <atomic>
#include <string>

#include "collectives/store.h"

namespace lockstep {
namespace collectives {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory) : dir_(std::move(directory)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  void Abort() override { aborted_.store(true); }

 private:
  std::string PathFor(absl::string_view key) const;

  const std::string dir_;
  std::atomic<bool> aborted_{false};
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_FILE_STORE_H_
