// Where a collective failure started. A rank that sees a peer leave can only name that
// peer, and the peer may itself have left because a third rank died: in a group of four,
// two of the survivors never talk to the dead rank during a halving-doubling step. So a
// failure carries the rank it started at as a status payload (PeerFailure / FailedRank);
// a rank that fails because of it aborts its transport with that rank
// (Transport::AbortOnPeerFailure), the transport passes the rank on to the peers, and every
// survivor reports the same culprit instead of the neighbour that relayed the news.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_PEER_FAILURE_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_PEER_FAILURE_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace collectives {

// UNAVAILABLE with `message`, recording that the failure started at `failed_rank`.
absl::Status PeerFailure(int failed_rank, absl::string_view message);

// What `rank` reports when `peer` left the group because of the failure at `failed_rank`
// (seen while `what` it: "receiving from", "sending to"): a PeerFailure naming
// `failed_rank`, so that every survivor names the same culprit.
absl::Status RelayedPeerFailure(int rank, int peer, int failed_rank, absl::string_view what);

// The rank a failure started at, when `status` records one (PeerFailure; the payload
// survives lockstep::Annotate).
std::optional<int> FailedRank(const absl::Status& status);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_PEER_FAILURE_H_
