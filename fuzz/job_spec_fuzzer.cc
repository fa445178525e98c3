// Fuzz target: a job spec as `lockstep submit` reads it: JSON -> JobSpec (client/job_format.h,
// the proto JSON mapping with unknown fields refused) -> the lowering the coordinator runs at
// submit (jobspec/lower.h, on two CPU workers) -> the engine's model builder
// (engine/model_builder.h). The model builder also sees specs that the lowering refused,
// since it must refuse bad models on its own. A spec that lowers must build, and its plan
// must be whole (no field left undecided).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "client/job_format.h"
#include "engine/model_builder.h"
#include "jobspec/lower.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::v1::JobSpec> spec = lockstep::client::ParseJobSpecJson(json, "fuzz");
  if (!spec.ok()) return 0;
  lockstep::jobspec::ClusterFacts cluster;
  cluster.workers = {{2, 0}, {2, 0}};
  const absl::StatusOr<lockstep::v1::JobPlan> plan =
      lockstep::jobspec::LowerJobSpec(*spec, cluster);
  absl::StatusOr<lockstep::engine::Graph> graph = lockstep::engine::BuildModel(spec->model());
  if (plan.ok() && !graph.ok()) std::abort();  // the lowering let through a model that cannot build
  if (plan.ok() && (plan->strategy() == lockstep::v1::STRATEGY_KIND_UNSPECIFIED ||
                    plan->communication().backend() == 0 || plan->input().eval() == 0 ||
                    plan->communication().timeout_ms() <= 0 || plan->checkpoint().keep() <= 0)) {
    std::abort();  // a plan with a decision left open
  }
  return 0;
}
