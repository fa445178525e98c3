#include "common/tf_config.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

using json = nlohmann::json;

constexpr const char* kTaskTypes[] = {"chief", "worker", "ps", "evaluator"};

bool KnownType(absl::string_view type) {
  for (const char* t : kTaskTypes) {
    if (type == t) return true;
  }
  return false;
}

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG ", field, ": ", what));
}

absl::Status Validate(const ClusterMap& cluster, const TaskRef& task) {
  if (cluster.empty()) {
    return Invalid("cluster", "is empty; expected at least one task type with addresses");
  }
  std::map<std::string, std::string> seen;  // address -> where
  for (const auto& [type, addresses] : cluster) {
    std::string field = absl::StrCat("cluster.", type);
    if (!KnownType(type)) {
      return Invalid(field, "unknown task type; expected chief, worker, ps or evaluator");
    }
    if (addresses.empty()) return Invalid(field, "is an empty list; expected addresses");
    if (type == "chief" && addresses.size() > 1) {
      return Invalid(
          field, absl::StrCat("has ", addresses.size(), " entries; there is at most one chief"));
    }
    if (type == "evaluator" && addresses.size() > 1) {
      return Invalid(field, absl::StrCat("has ", addresses.size(),
                                         " entries; there is at most one evaluator"));
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      std::string where = absl::StrCat(field, "[", i, "]");
      absl::StatusOr<HostPort> hp = ParseHostPort(addresses[i]);
      if (!hp.ok()) return Invalid(where, hp.status().message());
      auto [it, inserted] = seen.emplace(addresses[i], where);
      if (!inserted) {
        return Invalid(where, absl::StrCat("address \"", addresses[i], "\" is also used by ",
                                           it->second, "; every task needs its own host:port"));
      }
    }
  }
  if (!KnownType(task.type)) {
    return Invalid("task.type", absl::StrCat("\"", task.type,
                                             "\" is unknown; expected chief, worker, ps or "
                                             "evaluator"));
  }
  if (task.index < 0) {
    return Invalid("task.index", absl::StrCat(task.index, " is negative"));
  }
  auto it = cluster.find(task.type);
  if (it == cluster.end()) {
    // tf.estimator.RunConfig: the evaluator need not be listed in the cluster.
    if (task.type == "evaluator") {
      if (task.index != 0) {
        return Invalid("task.index", absl::StrCat(task.index,
                                                  " is out of range; there is one evaluator "
                                                  "(index 0)"));
      }
      return absl::OkStatus();
    }
    return Invalid("task.type",
                   absl::StrCat("\"", task.type, "\" has no entry in cluster; add its addresses"));
  }
  if (task.index >= static_cast<int>(it->second.size())) {
    return Invalid("task.index",
                   absl::StrCat(task.index, " is out of range; cluster.", task.type, " has ",
                                it->second.size(), " address(es), so 0..", it->second.size() - 1));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TaskRef::ToString() const { return absl::StrCat(type, "/", index); }

absl::StatusOr<TfConfig> TfConfig::Create(ClusterMap cluster, TaskRef task, std::string rpc_layer) {
  LS_RETURN_IF_ERROR(Validate(cluster, task));
  TfConfig c;
  c.cluster_ = std::move(cluster);
  c.task_ = std::move(task);
  c.rpc_layer_ = std::move(rpc_layer);
  return c;
}

absl::StatusOr<TfConfig> TfConfig::Parse(absl::string_view text) {
  json doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Invalid("(document)", "is not valid JSON");
  if (!doc.is_object()) return Invalid("(document)", "expected a JSON object");

  auto cit = doc.find("cluster");
  if (cit == doc.end()) {
    return Invalid("cluster", "is missing; expected {\"worker\": [\"host:port\", ...]}");
  }
  if (!cit->is_object()) return Invalid("cluster", "expected an object of task types");
  ClusterMap cluster;
  for (auto& [type, list] : cit->items()) {
    std::string field = absl::StrCat("cluster.", type);
    if (!list.is_array()) return Invalid(field, "expected a list of \"host:port\" strings");
    std::vector<std::string> addresses;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) {
        return Invalid(absl::StrCat(field, "[", i, "]"), "expected a \"host:port\" string");
      }
      addresses.push_back(list[i].get<std::string>());
    }
    cluster[type] = std::move(addresses);
  }

  auto tit = doc.find("task");
  if (tit == doc.end()) {
    return Invalid("task", "is missing; expected {\"type\": \"worker\", \"index\": 0}");
  }
  if (!tit->is_object()) return Invalid("task", "expected {\"type\": ..., \"index\": ...}");
  TaskRef task;
  auto type = tit->find("type");
  if (type == tit->end() || !type->is_string()) {
    return Invalid("task.type", "is missing or not a string; expected e.g. \"worker\"");
  }
  task.type = type->get<std::string>();
  auto index = tit->find("index");
  if (index == tit->end()) {
    task.index = 0;  // TensorFlow defaults a missing index to 0
  } else if (!index->is_number_integer()) {
    return Invalid("task.index", absl::StrCat("expected an integer, got ", index->dump()));
  } else {
    int64_t v = index->get<int64_t>();
    if (v < 0 || v > 1000000) {
      return Invalid("task.index", absl::StrCat(v, " is out of range"));
    }
    task.index = static_cast<int>(v);
  }

  std::string rpc_layer;
  auto rit = doc.find("rpc_layer");
  if (rit != doc.end()) {
    if (!rit->is_string()) return Invalid("rpc_layer", "expected a string such as \"grpc\"");
    rpc_layer = rit->get<std::string>();
  }
  return Create(std::move(cluster), std::move(task), std::move(rpc_layer));
}

std::string TfConfig::address() const {
  auto it = cluster_.find(task_.type);
  if (it == cluster_.end() || task_.index >= static_cast<int>(it->second.size())) return "";
  return it->second[task_.index];
}

std::optional<TaskRef> TfConfig::chief() const {
  if (cluster_.count("chief")) return TaskRef{"chief", 0};
  if (cluster_.count("worker")) return TaskRef{"worker", 0};
  return std::nullopt;
}

bool TfConfig::is_chief() const {
  std::optional<TaskRef> c = chief();
  return c.has_value() && *c == task_;
}

int TfConfig::num_workers() const {
  int n = 0;
  for (const char* t : {"chief", "worker"}) {
    auto it = cluster_.find(t);
    if (it != cluster_.end()) n += static_cast<int>(it->second.size());
  }
  return n;
}

std::string TfConfig::ToJson() const {
  json doc;
  doc["cluster"] = json::object();
  for (const auto& [type, addresses] : cluster_) doc["cluster"][type] = addresses;
  doc["task"] = {{"type", task_.type}, {"index", task_.index}};
  if (!rpc_layer_.empty()) doc["rpc_layer"] = rpc_layer_;
  return doc.dump();
}

}  // namespace lockstep
