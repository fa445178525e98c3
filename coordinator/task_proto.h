// Conversions between common/tf_config.h's TaskRef and ClusterMap and their protos
// (lockstep/v1/cluster.proto), for the two service adapters (grpc_worker_service,
// grpc_job_service). Thread model: pure functions.
#ifndef LOCKSTEP_COORDINATOR_TASK_PROTO_H_
#define LOCKSTEP_COORDINATOR_TASK_PROTO_H_

#include "common/tf_config.h"
#include "lockstep/v1/cluster.pb.h"

namespace lockstep {
namespace coordinator {

TaskRef FromProto(const v1::TaskId& task);
// Appends `cluster`'s addresses to `*out`, one job per task type.
void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_TASK_PROTO_H_
