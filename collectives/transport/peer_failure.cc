#include "collectives/transport/peer_failure.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace collectives {
namespace {
constexpr absl::string_view kFailedRankUrl = "type.lockstep.dev/collectives.FailedRank";
}  // namespace

absl::Status PeerFailure(int failed_rank, absl::string_view message) {
  absl::Status s = absl::UnavailableError(message);
  s.SetPayload(kFailedRankUrl, absl::Cord(absl::StrCat(failed_rank)));
  return s;
}

absl::Status RelayedPeerFailure(int rank, int peer, int failed_rank, absl::string_view what) {
  return PeerFailure(failed_rank, absl::StrCat("rank ", rank, ": peer rank ", peer,
                                               " left the group after peer rank ", failed_rank,
                                               " failed (seen while ", what, " rank ", peer,
                                               "); check rank ", failed_rank, "'s logs"));
}

std::optional<int> FailedRank(const absl::Status& status) {
  auto payload = status.GetPayload(kFailedRankUrl);  // absl::optional<absl::Cord>
  int rank;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &rank) || rank < 0) {
    return std::nullopt;
  }
  return rank;
}

}  // namespace collectives
}  // namespace lockstep
