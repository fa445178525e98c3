// InMemoryStore: the rendezvous Store for ranks that are threads of one process (tests).
//
// Owns a map of write-once keys. Thread model: thread-safe; Get blocks on a condition with
// the caller's deadline; Abort() wakes every blocked Get and fails later calls with ABORTED.
#ifndef LOCKSTEP_COLLECTIVES_IN_MEMORY_STORE_H_
#define LOCKSTEP_COLLECTIVES_IN_MEMORY_STORE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "collectives/store.h"
#include "common/clock.h"

namespace lockstep {
namespace collectives {

class InMemoryStore final : public Store {
 public:
  // `clock` (not owned, defaults to the real clock) decides when a Get's deadline passes.
  explicit InMemoryStore(Clock* clock = Clock::Real()) : clock_(clock) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  void Abort() override;

 private:
  Clock* const clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_IN_MEMORY_STORE_H_
