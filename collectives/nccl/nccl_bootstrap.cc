#include "collectives/nccl/nccl_bootstrap.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::collectives::nccl {

absl::StatusOr<std::string> ExchangeUniqueId(Store& store, NcclApi& api, int rank,
                                             absl::string_view key, absl::Time deadline) {
  if (rank == 0) {
    absl::StatusOr<std::string> id = api.GetUniqueId();
    if (!id.ok()) return Annotate(id.status(), "rank 0: creating the NCCL unique id");
    if (id->size() != kNcclUniqueIdBytes) {
      return absl::InternalError(absl::StrCat("rank 0: ncclGetUniqueId gave ", id->size(),
                                              " bytes, expected ", kNcclUniqueIdBytes));
    }
    // Hex: the coordinator's key-value values are strings.
    if (absl::Status s = store.Set(key, absl::BytesToHexString(*id)); !s.ok()) {
      return Annotate(s, absl::StrCat("rank 0: publishing the NCCL unique id under ", key));
    }
    return id;
  }
  absl::StatusOr<std::string> hex = store.Get(key, deadline);
  if (!hex.ok()) {
    return Annotate(hex.status(),
                    absl::StrCat("rank ", rank, ": waiting for rank 0's NCCL unique id"));
  }
  const bool is_hex = hex->find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!is_hex || hex->size() != 2 * kNcclUniqueIdBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, ": the value under ", key, " is not an NCCL unique id (",
                     hex->size(), " characters, expected ", 2 * kNcclUniqueIdBytes,
                     " hex digits): another program wrote this rendezvous key"));
  }
  return absl::HexStringToBytes(*hex);
}

}  // namespace lockstep::collectives::nccl
