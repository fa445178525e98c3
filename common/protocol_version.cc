// CheckProtocolVersion: the one comparison of two daemons' protocol versions.
#include "common/protocol_version.h"

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::Status CheckProtocolVersion(int32_t theirs, absl::string_view who) {
  if (theirs == kProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "protocol_version: ", who, " speaks Lockstep protocol version ", theirs,
      theirs == 0 ? " (it sends none: a lockstepd from before versions were sent)" : "",
      ", this coordinator speaks version ", kProtocolVersion,
      "; run the same Lockstep release on the coordinator and every worker"));
}

}  // namespace lockstep
