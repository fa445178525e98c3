// CollectiveObserver: what a Communicator tells an onlooker about the collectives it runs and
// the bytes they move, so that a flight recorder (worker/flight_recorder.h) and a daemon's
// metrics (worker/worker_metrics.h) can follow the group without the collectives knowing
// either. Every method has an empty default: an observer overrides what it needs.
//
// Collectives are numbered from 1 in the order they run, which is the order they were called
// in, the same on every rank of the group: the n-th collective of one rank is the n-th of
// every other, so "rank 2 never entered #n" means what it says (PyTorch's flight recorder,
// Horovod's stall inspector). OnEnter is called when the collective starts running (after
// those queued before it ended), OnLeave when it ends. A collective refused before it starts
// (INVALID_ARGUMENT, a failed or aborted communicator) is not reported.
//
// Set once when the communicator is created (CommunicatorConfig::observer, or
// Communicator::Create's `observer`) and borrowed: it must outlive the communicator. A null
// observer costs nothing. To have several observers watch one communicator (a flight
// recorder and the metrics), give it a CollectiveObserverList.
//
// Thread model: called from the threads that run collectives (a communicator's own thread and
// the callers of its sync calls; one collective at a time per communicator, not always on the
// same thread), possibly from several communicators at once: an implementation must be
// thread-safe and cheap (it runs on the data path), and must not call back into the
// communicator.
#ifndef LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
#define LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

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
  // A collective starts running / has ended with `status`.
  virtual void OnEnter(const CollectiveCall& call) {}
  virtual void OnLeave(const CollectiveCall& call, const absl::Status& status) {}
  // An all-reduce counted in Communicator::async_all_reduce_totals() succeeded: `bytes` per
  // rank, `time` running (queueing excluded), in a group of `group_size` ranks.
  virtual void AllReduceDone(size_t bytes, absl::Duration time, int group_size) {}
  // A message of `bytes` was sent to / received from rank `peer` of the group. Told only to
  // an observer whose counts_bytes() is true: counting wraps the transport (ObservedTransport),
  // a virtual call more per message, which an observer of collectives alone does not pay.
  virtual bool counts_bytes() const { return false; }
  virtual void Sent(int peer, size_t bytes) {}
  virtual void Received(int peer, size_t bytes) {}
};

// Several observers of one communicator (a flight recorder and the metrics), each told
// everything, in order. Null entries are skipped. Borrows them; they must outlive it.
class CollectiveObserverList final : public CollectiveObserver {
 public:
  explicit CollectiveObserverList(std::vector<CollectiveObserver*> observers) {
    for (CollectiveObserver* o : observers) {
      if (o != nullptr) observers_.push_back(o);
    }
  }
  bool counts_bytes() const override {
    for (const CollectiveObserver* o : observers_) {
      if (o->counts_bytes()) return true;
    }
    return false;
  }
  void OnEnter(const CollectiveCall& call) override {
    for (CollectiveObserver* o : observers_) o->OnEnter(call);
  }
  void OnLeave(const CollectiveCall& call, const absl::Status& status) override {
    for (CollectiveObserver* o : observers_) o->OnLeave(call, status);
  }
  void AllReduceDone(size_t bytes, absl::Duration time, int group_size) override {
    for (CollectiveObserver* o : observers_) o->AllReduceDone(bytes, time, group_size);
  }
  void Sent(int peer, size_t bytes) override {
    for (CollectiveObserver* o : observers_) o->Sent(peer, bytes);
  }
  void Received(int peer, size_t bytes) override {
    for (CollectiveObserver* o : observers_) o->Received(peer, bytes);
  }

 private:
  std::vector<CollectiveObserver*> observers_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
