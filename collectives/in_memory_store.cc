#include "collectives/in_memory_store.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace collectives {

absl::Status InMemoryStore::Set(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return absl::AbortedError(absl::StrCat("store aborted; Set(", key, ")"));
  auto [it, inserted] = values_.emplace(std::string(key), std::string(value));
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("store key '", key, "' is already set (keys are write-once)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(absl::string_view key, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  std::string k(key);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return aborted_ || values_.contains(k); };
  clock_->WaitUntil(&mu_, absl::Condition(&ready), deadline);
  if (aborted_) return absl::AbortedError(absl::StrCat("store aborted; Get(", key, ")"));
  auto it = values_.find(k);
  if (it == values_.end()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "store key '", key, "' not set by the deadline; is every rank of the group started?"));
  }
  return it->second;
}

void InMemoryStore::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
}

}  // namespace collectives
}  // namespace lockstep
