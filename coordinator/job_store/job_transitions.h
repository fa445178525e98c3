// The job state machine as one table of named transitions: what JobStore enforces on every
// write and what the coordinator's JobService asks before it decides (can this job still be
// cancelled, started, is it over). Like JobAttempt's transitions (XLA's coordination
// service's TaskState), every move has a name; unlike a switch in the store and copies of
// its rules in the service, the table is the only place a legal move is written down.
//
//              Create()
//                 |
//                 v
//   +-------> PENDING ----------------------+
//   | kRequeue    | kStartAttempt           | kCancel
//   |             v                         v
//   +-------- RUNNING ---------------> CANCELLED <---+
//              |  ^  \                               | kCancel
//              |  |   \ kRestart: a worker lost or   |
//              |  |    v failed, restarts left       |
//              |  +- RESTARTING ---------------------+
//   kSucceed / | kStartAttempt   |
//   kFail      |                 | kFail (refused at scheduling)
//        +-----+-----+           |
//        v           v           v
//    SUCCEEDED     FAILED <------+---- PENDING (kFail: refused when scheduled, e.g. the
//                                      global batch does not split over the workers found)
//
// A state no transition leaves is terminal (SUCCEEDED, FAILED, CANCELLED).
// Thread model: constant data and pure functions.
#ifndef LOCKSTEP_COORDINATOR_JOB_STORE_JOB_TRANSITIONS_H_
#define LOCKSTEP_COORDINATOR_JOB_STORE_JOB_TRANSITIONS_H_

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "lockstep/v1/job.pb.h"

namespace lockstep {

enum class JobTransition : uint8_t {
  kStartAttempt,  // PENDING or RESTARTING -> RUNNING: an attempt starts (attempt + 1)
  kSucceed,       // RUNNING -> SUCCEEDED: every worker finished
  kRestart,       // RUNNING -> RESTARTING: the attempt ended, another follows
  kRequeue,       // RUNNING -> PENDING: back to the queue, no restart spent
  kFail,          // PENDING, RUNNING or RESTARTING -> FAILED
  kCancel,        // PENDING, RUNNING or RESTARTING -> CANCELLED
};

// One row of the table: `transition` moves a job from `from` to `to`.
struct JobTransitionRule {
  JobTransition transition;
  v1::JobState from;
  v1::JobState to;
};

// Every legal move, one row each.
absl::Span<const JobTransitionRule> JobTransitionTable();

// "StartAttempt", "Succeed", ...
const char* JobTransitionName(JobTransition transition);

// The named transition that moves a job from `from` to `to`; nullopt when the machine has none.
std::optional<JobTransition> FindJobTransition(v1::JobState from, v1::JobState to);

// The state `transition` leaves a job in `from` in; nullopt when it does not apply to `from`.
std::optional<v1::JobState> JobStateAfter(JobTransition transition, v1::JobState from);

// Whether `transition` applies to a job in `state`.
inline bool CanApply(JobTransition transition, v1::JobState state) {
  return JobStateAfter(transition, state).has_value();
}

// A known state that no transition leaves: the job has ended.
bool IsTerminalJobState(v1::JobState state);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_STORE_JOB_TRANSITIONS_H_
