// TfConfig: the TF_CONFIG cluster resolver, with TensorFlow's semantics.
//
//   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
//                "ps": ["host3:2222"], "evaluator": ["host4:2222"]},
//    "task": {"type": "worker", "index": 1},
//    "rpc_layer": "grpc"}
//
// Rules (as tf.distribute.cluster_resolver.TFConfigClusterResolver and RunConfig):
// - task types are chief, worker, ps, evaluator; at most one chief, at most one evaluator;
// - the chief is the `chief` task, else worker 0; num_workers counts chief + workers;
// - the evaluator is outside the training group (never chief, not in num_workers) and,
//   as in tf.estimator.RunConfig, may be absent from `cluster` (then its index is 0);
// - every address is host:port (IPv6 as "[::1]:2222"); no address appears twice.
// Parse() refuses anything else with INVALID_ARGUMENT naming the field ("task.index",
// "cluster.worker[1]") and what was expected.
//
// Value type: immutable after construction, safe to share between threads.
#ifndef LOCKSTEP_COMMON_TF_CONFIG_H_
#define LOCKSTEP_COMMON_TF_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

struct TaskRef {
  std::string type;
  int index = 0;
  bool operator==(const TaskRef& o) const { return type == o.type && index == o.index; }
  bool operator!=(const TaskRef& o) const { return !(*this == o); }
  bool operator<(const TaskRef& o) const {
    return type != o.type ? type < o.type : index < o.index;
  }
  // "worker/1"
  std::string ToString() const;
};

// Task type -> addresses in index order (TF_CONFIG's "cluster").
using ClusterMap = std::map<std::string, std::vector<std::string>>;

class TfConfig {
 public:
  // Parses and validates a TF_CONFIG JSON document.
  static absl::StatusOr<TfConfig> Parse(absl::string_view json);
  // Validates a cluster and a task given as values (the coordinator builds TF_CONFIGs for
  // workers it assigned). Same rules and messages as Parse().
  static absl::StatusOr<TfConfig> Create(ClusterMap cluster, TaskRef task,
                                         std::string rpc_layer = "");

  const ClusterMap& cluster() const { return cluster_; }
  const TaskRef& task() const { return task_; }
  const std::string& task_type() const { return task_.type; }
  int task_index() const { return task_.index; }
  // "" when TF_CONFIG has none.
  const std::string& rpc_layer() const { return rpc_layer_; }
  // This task's own address; "" for an evaluator absent from the cluster.
  std::string address() const;

  // The chief: the `chief` task if there is one, else worker 0; nullopt with neither.
  std::optional<TaskRef> chief() const;
  bool is_chief() const;
  // Chief + workers (the training group; ps and evaluator excluded).
  int num_workers() const;
  bool is_evaluator() const { return task_.type == "evaluator"; }

  // Back to TF_CONFIG JSON (cluster, task, and rpc_layer when set).
  std::string ToJson() const;

 private:
  TfConfig() = default;
  ClusterMap cluster_;
  TaskRef task_;
  std::string rpc_layer_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_TF_CONFIG_H_
