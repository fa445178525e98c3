// Logging setup for the binaries: spdlog's default logger to stderr with one format
// ("2026-01-01 12:00:00.123 I lockstepd 1234] message"). Called once from main().
#ifndef LOCKSTEP_COMMON_LOGGING_H_
#define LOCKSTEP_COMMON_LOGGING_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// `level`: "debug", "info", "warn" or "error". INVALID_ARGUMENT for anything else.
absl::Status InitLogging(absl::string_view program, absl::string_view level);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_LOGGING_H_
