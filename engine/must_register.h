// MustRegister: how the built-in registries (BuiltinOps() in ops/builtin_ops.h, BuiltinLayers()
// in layers/builtin_layers.h) add each definition, written once for both. A built-in
// registration fails only when the code is wrong (a name registered twice, a definition
// without its function), so the process aborts, naming the registry and the reason.
//
// A registry usable here names its definition type `Def`, its name for messages `kName`, and
// has `absl::Status Register(Def)` (OpRegistry, LayerRegistry). Thread model: the registry's
// own (filled on one thread).
#ifndef LOCKSTEP_ENGINE_MUST_REGISTER_H_
#define LOCKSTEP_ENGINE_MUST_REGISTER_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep::engine {
namespace internal {

// Writes "<registry>: <status's message>" to stderr and aborts.
[[noreturn]] void AbortRegistration(absl::string_view registry, const absl::Status& status);

}  // namespace internal

// Registers `def` in `registry`, aborting with the reason when that fails. `def` is not
// deduced, so a braced definition works: MustRegister(r, {v1::RELU, ...}).
template <typename Registry>
void MustRegister(Registry* registry, typename Registry::Def def) {
  absl::Status status = registry->Register(std::move(def));
  if (!status.ok()) internal::AbortRegistration(Registry::kName, status);
}

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_MUST_REGISTER_H_
