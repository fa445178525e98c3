// CollectiveObserver: what a Communicator tells an onlooker about each collective it runs,
// so that a flight recorder (worker/flight_recorder.h) or a metrics exporter can follow the
// group without the collectives knowing either. Collectives are numbered from 1 in the order
// they run, which is the order they were called in, the same on every rank of the group: the
// n-th collective of one rank is the n-th of every other, so "rank 2 never entered #n" means
// what it says (PyTorch's flight recorder, Horovod's stall inspector).
//
// OnEnter is called when the collective starts running (after those queued before it ended),
// OnLeave when it ends, both on the thread that runs it (the caller's or the communicator's
// own). A collective refused before it starts (INVALID_ARGUMENT, a failed or aborted
// communicator) is not reported. Thread model: calls come from one thread at a time per
// communicator, but not always the same thread; implementations must be cheap (they run
// on the collective's critical path) and must not call back into the communicator.
#ifndef LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
#define LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace lockstep {
namespace collectives {

struct CollectiveCall {
  int64_t seq = 0;        // 1, 2, ... per communicator, in run order
  const char* kind = "";  // "all-reduce", "broadcast", ... (static strings)
  size_t bytes = 0;       // payload per rank; 0 when not known
};

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  virtual void OnEnter(const CollectiveCall& call) = 0;
  virtual void OnLeave(const CollectiveCall& call, const absl::Status& status) = 0;
};

// Several observers of one communicator (a flight recorder and a metrics exporter), told in
// order. Borrows them; they must outlive it.
class CollectiveObserverList final : public CollectiveObserver {
 public:
  explicit CollectiveObserverList(std::vector<CollectiveObserver*> observers)
      : observers_(std::move(observers)) {}
  void OnEnter(const CollectiveCall& call) override {
    for (CollectiveObserver* o : observers_) o->OnEnter(call);
  }
  void OnLeave(const CollectiveCall& call, const absl::Status& status) override {
    for (CollectiveObserver* o : observers_) o->OnLeave(call, status);
  }

 private:
  const std::vector<CollectiveObserver*> observers_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
