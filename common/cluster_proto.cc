#include "common/cluster_proto.h"

namespace lockstep {

TaskRef FromProto(const v1::TaskId& task) { return TaskRef{task.type(), task.index()}; }

void ToProto(const TaskRef& task, v1::TaskId* out) {
  out->set_type(task.type);
  out->set_index(task.index);
}

ClusterMap FromProto(const v1::ClusterSpec& cluster) {
  ClusterMap out;
  for (const auto& [type, tasks] : cluster.jobs()) {
    std::vector<std::string>& addresses = out[type];
    addresses.assign(tasks.addresses().begin(), tasks.addresses().end());
  }
  return out;
}

void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out) {
  for (const auto& [type, addresses] : cluster) {
    auto& tasks = (*out->mutable_jobs())[type];
    for (const std::string& a : addresses) tasks.add_addresses(a);
  }
}

absl::StatusOr<TfConfig> TfConfigFromProto(const v1::ClusterSpec& cluster, const v1::TaskId& task) {
  return TfConfig::Create(FromProto(cluster), FromProto(task));
}

}  // namespace lockstep
