#include "common/status.h"

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  // Payloads say more than the message does (collectives: which rank a failure started at).
  status.ForEachPayload([&annotated](absl::string_view type_url, const absl::Cord& payload) {
    annotated.SetPayload(type_url, payload);
  });
  return annotated;
}

}  // namespace lockstep
