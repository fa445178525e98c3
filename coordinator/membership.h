// Membership: who is in the cluster, under which incarnation, and whether it is alive.
//
// Each task (chief/worker/ps/evaluator + index) is held by at most one process, known by
// its incarnation (a random 64-bit id drawn at process start). Rules:
// - the same task and incarnation registering again is idempotent (a retried RPC, or a
//   LOST worker coming back): the task becomes ALIVE again;
// - a new incarnation replaces the holder when the holder is LOST or DEREGISTERED
//   (a restarted process); the registration reports the replaced incarnation so that
//   later issues can abort its work;
// - a new incarnation while the holder is ALIVE (heartbeat within the timeout) is refused
//   with ALREADY_EXISTS naming the holder: two live processes never share a task;
// - a task is bound to the identity that first registered it (the CN of the worker's
//   certificate; empty under --insecure, where nothing is bound) until that identity
//   deregisters it cleanly or an operator releases it (Release: `lockstep release`). Another
//   identity registering it is refused (PERMISSION_DENIED naming the binding), even while
//   the task is LOST; CheckHolder() lets the gRPC adapter refuse heartbeats,
//   deregistrations and assignment streams for the task from any other identity;
// - task indexes are bounded (`max_task_index`), and so is the number of tasks one identity
//   holds (`max_tasks_per_identity`): RESOURCE_EXHAUSTED naming the flag, nothing changed;
// - two live tasks of one identity (under --insecure: any two) never share an address
//   (ALREADY_EXISTS). An address another identity's task uses does not refuse the
//   registration (the coordinator cannot tell which identity really serves it, and a
//   refusal would let any certificate keep the owner of a task out by registering its
//   address first); Registration names the tasks that share it, for the adapter to log;
// - with no task given (dynamic registration) the identity's own LOST worker task is taken
//   back (a restarted process), else the lowest worker index that is free (never held, or
//   DEREGISTERED) is assigned; a LOST task keeps its index for its return.
// Failure detection: a task silent for longer than `heartbeat_timeout` is LOST. This is
// checked on every call (so answers never depend on a background thread) and by Sweep(),
// which the server calls periodically to log the transitions.
//
// Ownership: owns its records; the Clock is borrowed and must outlive it.
// Thread model: every method is thread-safe (one mutex, never held across a callback).
#ifndef LOCKSTEP_COORDINATOR_MEMBERSHIP_H_
#define LOCKSTEP_COORDINATOR_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/protocol_version.h"
#include "common/tf_config.h"
#include "lockstep/v1/cluster.pb.h"

namespace lockstep {
namespace coordinator {

struct MembershipOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  // Task indexes are 0..max_task_index-1 (--max_task_index): a registration past it, static
  // or dynamic, is refused (RESOURCE_EXHAUSTED).
  int max_task_index = 4096;
  // At most this many tasks are bound to one certificate identity (--max_tasks_per_identity).
  int max_tasks_per_identity = 8;
};

struct RegisterRequest {
  std::optional<TaskRef> task;  // nullopt: assign the next free worker index
  std::string address;          // host:port
  std::vector<v1::Device> devices;
  uint64_t incarnation = 0;  // non-zero
  std::string identity;      // the caller's certificate identity; "" when not known
  // The wire protocol it speaks (RegisterWorkerRequest.protocol_version, 0 when a worker
  // from before the field sent none); only kProtocolVersion registers.
  int32_t protocol_version = kProtocolVersion;
};

struct Registration {
  TaskRef task;
  ClusterMap cluster;  // every task that holds an index (LOST ones included)
  // The incarnation this registration replaced (0 when none): its work must be aborted.
  uint64_t replaced_incarnation = 0;
  // Live tasks of other identities that use the same address (see the header comment).
  std::vector<TaskRef> address_shared_with;
};

class Membership {
 public:
  Membership(MembershipOptions options, Clock* clock);

  // Errors: FAILED_PRECONDITION (a protocol version other than this coordinator's, both
  // named: common/protocol_version.h), INVALID_ARGUMENT (incarnation 0, unknown task type,
  // negative index, address not host:port), PERMISSION_DENIED (the task is bound to another
  // identity), ALREADY_EXISTS (task held by another live incarnation, or address used by another
  // live task of the same identity), RESOURCE_EXHAUSTED (index at or past max_task_index, no free
  // worker index, or the identity holds max_tasks_per_identity tasks).
  absl::StatusOr<Registration> Register(const RegisterRequest& request);

  // Records liveness (a job's progress rides in the heartbeat's reports, which the
  // JobService takes). Errors: NOT_FOUND (task unknown: the coordinator may have restarted;
  // re-register), ABORTED (incarnation mismatch, or the task is LOST or DEREGISTERED:
  // re-register).
  // `leaving`: the process is shutting down; the task counts as draining (TaskStatus.
  // draining) until a process registers it again.
  // `drained`, when not null, receives whether an operator drained the task (SetDraining).
  absl::Status Heartbeat(const TaskRef& task, uint64_t incarnation, bool leaving = false,
                         bool* drained = nullptr);

  // OK when `identity` registered `task` (or the task is unknown, or either identity is
  // empty: --insecure). PERMISSION_DENIED naming the task, its holder and `action` otherwise.
  absl::Status CheckHolder(const TaskRef& task, const std::string& identity,
                           const std::string& action);

  // The certificate identity that registered `task` ("" when unknown or under --insecure).
  std::string IdentityOf(const TaskRef& task);

  // Leaves cleanly; the task is no longer bound to its identity. Errors: NOT_FOUND,
  // ABORTED (incarnation mismatch).
  absl::Status Deregister(const TaskRef& task, uint64_t incarnation);

  // An operator's release: unbinds `task` from the identity that registered it, so that any
  // identity may register it (a machine replaced under another name). The task becomes
  // DEREGISTERED; returns its status. Errors: NOT_FOUND naming the task; FAILED_PRECONDITION
  // while it is ALIVE (its process would be cut off: stop it, which deregisters it, or
  // wait until it is LOST).
  absl::StatusOr<v1::TaskStatus> Release(const TaskRef& task);

  // Marks a known training task drained (no job is scheduled on it; TaskStatus.draining), or
  // schedulable again. The mark belongs to the task, so it outlives a restart of its
  // process. Returns its status. NOT_FOUND naming the task; INVALID_ARGUMENT for a task
  // that is not a worker or the chief.
  absl::StatusOr<v1::TaskStatus> SetDraining(const TaskRef& task, bool draining);

  // Marks every ALIVE task silent past the timeout as LOST; returns those (with the
  // incarnation they had) so the caller can log them or abort their jobs.
  std::vector<v1::TaskStatus> Sweep();

  // One row per known task, in task order, with states brought up to date.
  std::vector<v1::TaskStatus> Snapshot();
  ClusterMap Cluster();

  const MembershipOptions& options() const { return options_; }

 private:
  struct Member {
    TaskRef task;
    std::string address;
    std::vector<v1::Device> devices;
    uint64_t incarnation = 0;
    std::string identity;  // the task is bound to it while the state is not DEREGISTERED
    v1::TaskState state = v1::ALIVE;
    absl::Time last_heartbeat;
    absl::Time registered;
    bool leaving = false;  // its process said it is shutting down
  };

  // Marks `m` LOST if it is ALIVE and silent past the timeout; true if it changed.
  bool ExpireLocked(Member& m, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<v1::TaskStatus> SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<TaskRef> AssignLocked(const RegisterRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when `identity` may hold `task` (PERMISSION_DENIED: bound to another identity) and
  // one more task (RESOURCE_EXHAUSTED: max_tasks_per_identity).
  absl::Status CheckBindingLocked(const TaskRef& task, const std::string& identity) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ClusterMap ClusterLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::TaskStatus ToStatus(const Member& m, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(const Member& m, absl::Time now) const;

  const MembershipOptions options_;
  Clock* const clock_;
  absl::Mutex mu_;
  std::map<TaskRef, Member> members_ ABSL_GUARDED_BY(mu_);
  std::set<TaskRef> drained_ ABSL_GUARDED_BY(mu_);
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_MEMBERSHIP_H_
