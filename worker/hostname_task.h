// TaskFromHostname: a worker's task from its host name, for Kubernetes StatefulSets
// (`lockstepd --task_index_from_hostname`). A StatefulSet names its pods <set>-<ordinal>
// ("lockstep-worker-2") and keeps that name across crashes and rescheduling, so the pod's
// ordinal is a stable task index: worker/2 stays worker/2 wherever the pod runs.
//
// Free function; no state, safe from any thread.
#ifndef LOCKSTEP_WORKER_HOSTNAME_TASK_H_
#define LOCKSTEP_WORKER_HOSTNAME_TASK_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tf_config.h"

namespace lockstep::worker {

// worker/<N> for a host name that ends in "-<N>" (decimal, no sign). The first label of a
// fully qualified name is used ("lockstep-worker-2.lockstep-worker.ns.svc" -> worker/2).
// INVALID_ARGUMENT naming --task_index_from_hostname and the host name otherwise.
absl::StatusOr<TaskRef> TaskFromHostname(absl::string_view hostname);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_WORKER_HOSTNAME_TASK_H_
