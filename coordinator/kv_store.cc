#include "coordinator/kv_store.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace coordinator {
namespace {

absl::Status ShutdownError() {
  return absl::UnavailableError("the coordinator is shutting down; retry against its successor");
}

}  // namespace

absl::Status KvStore::Set(const std::string& key, const std::string& value, bool overwrite) {
  if (key.empty()) return absl::InvalidArgumentError("key: must not be empty");
  absl::MutexLock l(&mu_);
  if (shutdown_) return ShutdownError();
  auto [it, inserted] = data_.emplace(key, value);
  if (!inserted) {
    if (!overwrite) {
      return absl::AlreadyExistsError(absl::StrCat("key \"", key,
                                                   "\" is already set (keys are write-once unless "
                                                   "overwrite is requested)"));
    }
    it->second = value;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvStore::Get(const std::string& key, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto ready = [&]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || data_.count(key) > 0; };
  clock_->WaitUntil(&mu_, absl::Condition(&ready), deadline);
  if (shutdown_) return ShutdownError();
  auto it = data_.find(key);
  if (it == data_.end()) {
    return absl::DeadlineExceededError(
        absl::StrCat("key \"", key,
                     "\" was not set by the deadline; check that the task "
                     "that publishes it is running and uses the same job "
                     "and attempt"));
  }
  return it->second;
}

int KvStore::DeletePrefix(const std::string& prefix) {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (auto it = data_.lower_bound(prefix);
       it != data_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = data_.erase(it);
    ++n;
  }
  return n;
}

int KvStore::size() {
  absl::MutexLock l(&mu_);
  return static_cast<int>(data_.size());
}

void KvStore::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

}  // namespace coordinator
}  // namespace lockstep
