// Fuzz target: a model file (examples/digits_*.json) through engine::ParseModelSpecJson, which
// refuses unknown fields and layer kinds naming where they are, then engine::BuildModel.
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/model_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::v1::ModelSpec> spec = lockstep::engine::ParseModelSpecJson(json);
  if (spec.ok()) (void)lockstep::engine::BuildModel(*spec);
  return 0;
}
