// Every export format Lockstep ships, in one registry (format_registry.h).
#ifndef LOCKSTEP_EXPORT_BUILTIN_FORMATS_H_
#define LOCKSTEP_EXPORT_BUILTIN_FORMATS_H_

#include "absl/status/statusor.h"
#include "export/format_registry.h"

namespace lockstep::exporting {

// Fails only if two formats claim one name (a programming error, caught by its test).
absl::StatusOr<FormatRegistry> BuiltinFormats();

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_BUILTIN_FORMATS_H_
