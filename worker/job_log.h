// JobLog: the log lines of one job attempt on this worker, numbered from 1, kept in a
// bounded ring (the oldest go first), for `lockstep logs` (DESIGN.md, "When a job hangs").
// The lines reach the coordinator in heartbeats: Pending() gives those not yet delivered
// (at most `batch` at a time), Delivered(seq) records that a heartbeat carrying lines up to
// `seq` reached it; a failed heartbeat leaves them pending, so they go again (the
// coordinator keeps each seq once).
//
// Ownership: a value type behind a lock. Thread model: thread-safe.
#ifndef LOCKSTEP_WORKER_JOB_LOG_H_
#define LOCKSTEP_WORKER_JOB_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace worker {

class JobLog {
 public:
  // Borrows the clock. `capacity`: lines kept; `batch`: lines per Pending().
  explicit JobLog(Clock* clock, size_t capacity = 4096, size_t batch = 512);

  void Add(std::string text);
  // The oldest lines not yet delivered, up to the batch size.
  std::vector<v1::LogLine> Pending() const;
  void Delivered(int64_t up_to_seq);
  // Every line still kept, oldest first.
  std::vector<v1::LogLine> Lines() const;

 private:
  Clock* const clock_;
  const size_t capacity_;
  const size_t batch_;
  mutable absl::Mutex mu_;
  std::deque<v1::LogLine> lines_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_LOG_H_
