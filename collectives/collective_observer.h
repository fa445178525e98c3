// CollectiveObserver: told what a Communicator moved, for a daemon's metrics. Optional (a
// null observer costs nothing); set once when the communicator is created
// (CommunicatorConfig::observer) and borrowed: it must outlive the communicator.
//
// Thread model: called from the threads that run collectives (a communicator's own thread
// and the callers of its sync calls), possibly from several communicators at once: an
// implementation must be thread-safe and cheap (it runs on the data path).
#ifndef LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
#define LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_

#include <cstddef>

#include "absl/time/time.h"

namespace lockstep {
namespace collectives {

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  // An all-reduce counted in Communicator::async_all_reduce_totals() succeeded: `bytes` per
  // rank, `time` running (queueing excluded), in a group of `group_size` ranks.
  virtual void AllReduceDone(size_t bytes, absl::Duration time, int group_size) = 0;
  // A message of `bytes` was sent to / received from rank `peer` of the group.
  virtual void Sent(int peer, size_t bytes) = 0;
  virtual void Received(int peer, size_t bytes) = 0;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COLLECTIVE_OBSERVER_H_
