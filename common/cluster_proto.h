// Conversions between common/tf_config.h's values (TaskRef, ClusterMap, TfConfig) and their
// typed protos (lockstep/v1/cluster.proto: TaskId, ClusterSpec). The control plane carries
// only the protos; TF_CONFIG text exists at the edges, where users write it (lockstepd's
// --tf_config and $TF_CONFIG, parsed by TfConfig::Parse) and where a process must read it
// (rendered once, by TfConfig::ToJson, from a TfConfig made here).
// Thread model: pure functions.
#ifndef LOCKSTEP_COMMON_CLUSTER_PROTO_H_
#define LOCKSTEP_COMMON_CLUSTER_PROTO_H_

#include "absl/status/statusor.h"
#include "common/tf_config.h"
#include "lockstep/v1/cluster.pb.h"

namespace lockstep {

TaskRef FromProto(const v1::TaskId& task);
void ToProto(const TaskRef& task, v1::TaskId* out);

// One entry per task type, addresses in index order. A type whose list is empty in the
// proto is kept as an empty list (TfConfig's validation refuses it, naming the type).
ClusterMap FromProto(const v1::ClusterSpec& cluster);
// Appends `cluster`'s addresses to `*out`, one job per task type.
void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out);

// The cluster and task as a TfConfig, validated with TF_CONFIG's rules (TfConfig::Create):
// INVALID_ARGUMENT naming the field ("TF_CONFIG cluster.worker[1]: ...", "TF_CONFIG
// task.index: ...").
absl::StatusOr<TfConfig> TfConfigFromProto(const v1::ClusterSpec& cluster, const v1::TaskId& task);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CLUSTER_PROTO_H_
