// Fuzz target: TF_CONFIG JSON through TfConfig::Parse (common/tf_config.h), the document every
// lockstepd reads at start. A config that parses must answer its queries and survive a round
// trip through ToJson() unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/tf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::TfConfig> config = lockstep::TfConfig::Parse(json);
  if (!config.ok()) return 0;
  (void)config->address();
  (void)config->chief();
  (void)config->is_chief();
  (void)config->num_workers();
  absl::StatusOr<lockstep::TfConfig> again = lockstep::TfConfig::Parse(config->ToJson());
  if (!again.ok() || again->cluster() != config->cluster() || again->task() != config->task() ||
      again->rpc_layer() != config->rpc_layer()) {
    std::abort();  // ToJson() wrote something Parse() reads differently
  }
  return 0;
}
