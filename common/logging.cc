#include "common/logging.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace lockstep {

absl::Status InitLogging(absl::string_view program, absl::string_view level) {
  spdlog::level::level_enum lvl;
  if (level == "debug") {
    lvl = spdlog::level::debug;
  } else if (level == "info") {
    lvl = spdlog::level::info;
  } else if (level == "warn") {
    lvl = spdlog::level::warn;
  } else if (level == "error") {
    lvl = spdlog::level::err;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: expected debug, info, warn or error, got \"", level, "\""));
  }
  auto logger = spdlog::stderr_logger_mt(std::string(program));
  logger->set_pattern(absl::StrCat("%Y-%m-%d %H:%M:%S.%e %L ", program, " %P] %v"));
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::debug);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace lockstep
