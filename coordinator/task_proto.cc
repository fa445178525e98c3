#include "coordinator/task_proto.h"

namespace lockstep {
namespace coordinator {

TaskRef FromProto(const v1::TaskId& task) { return TaskRef{task.type(), task.index()}; }

void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out) {
  for (const auto& [type, addresses] : cluster) {
    auto& tasks = (*out->mutable_jobs())[type];
    for (const std::string& a : addresses) tasks.add_addresses(a);
  }
}

}  // namespace coordinator
}  // namespace lockstep
