// Fuzz target: a job spec as `lockstep submit` reads it: JSON -> JobSpec (client/job_format.h,
// the proto JSON mapping with unknown fields refused) -> the coordinator's validation
// (coordinator/job_validation.h) -> the engine's model builder (engine/model_builder.h). The
// model builder also sees specs that validation refused, since it must refuse bad models on
// its own. A spec that validation accepts must build.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "client/job_format.h"
#include "coordinator/job_validation.h"
#include "engine/model_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::v1::JobSpec> spec = lockstep::client::ParseJobSpecJson(json, "fuzz");
  if (!spec.ok()) return 0;
  const absl::Status valid = lockstep::coordinator::ValidateJobSpec(*spec);
  (void)lockstep::coordinator::EffectiveStrategy(*spec);
  (void)lockstep::coordinator::CheckBatchDivisible(*spec, 3);
  absl::StatusOr<lockstep::engine::Graph> graph = lockstep::engine::BuildModel(spec->model());
  if (valid.ok() && !graph.ok()) std::abort();  // validation let through a model that cannot build
  return 0;
}
