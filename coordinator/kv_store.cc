#include "coordinator/kv_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockstep {
namespace coordinator {
namespace {

absl::Status ShutdownError() {
  return absl::UnavailableError("the coordinator is shutting down; retry against its successor");
}

}  // namespace

std::string KvScopeOf(const std::string& key) {
  if (!absl::StartsWith(key, "jobs/")) return "";
  const size_t end = key.find('/', 5);
  return end == std::string::npos ? key : key.substr(0, end + 1);
}

std::string KvScopeName(const std::string& scope) {
  if (scope.empty()) return "the workers' common area";
  absl::string_view job = absl::StripSuffix(absl::StripPrefix(scope, "jobs/"), "/");
  return absl::StrCat("job ", job);
}

absl::Status KvStore::Set(const std::string& key, const std::string& value, bool overwrite) {
  if (key.empty()) return absl::InvalidArgumentError("key: must not be empty");
  if (static_cast<int64_t>(key.size()) > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: ", key.size(), " bytes, over the limit of ", limits_.max_key_bytes));
  }
  if (static_cast<int64_t>(value.size()) > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of key \"", key, "\": ", value.size(), " bytes, over the limit of ",
                     limits_.max_value_bytes, " (coordinator flag --max_kv_value_bytes)"));
  }
  absl::MutexLock l(&mu_);
  if (shutdown_) return ShutdownError();
  auto it = data_.find(key);
  if (it != data_.end() && !overwrite) {
    return absl::AlreadyExistsError(absl::StrCat("key \"", key,
                                                 "\" is already set (keys are write-once unless "
                                                 "overwrite is requested)"));
  }
  const std::string scope = KvScopeOf(key);
  Usage& usage = usage_[scope];
  const bool added = it == data_.end();
  const int64_t entries = usage.entries + (added ? 1 : 0);
  const int64_t bytes =
      usage.bytes + static_cast<int64_t>(value.size()) +
      (added ? static_cast<int64_t>(key.size()) : -static_cast<int64_t>(it->second.size()));
  if (entries > limits_.max_entries_per_job) {
    if (usage.entries == 0) usage_.erase(scope);
    return absl::ResourceExhaustedError(
        absl::StrCat("key \"", key, "\": ", KvScopeName(scope), " already holds ", usage.entries,
                     " keys, the limit (coordinator flag --max_kv_entries_per_job)"));
  }
  if (bytes > limits_.max_bytes_per_job) {
    if (usage.entries == 0) usage_.erase(scope);
    return absl::ResourceExhaustedError(
        absl::StrCat("key \"", key, "\": ", KvScopeName(scope), " would hold ", bytes,
                     " bytes of keys and values, over the limit of ", limits_.max_bytes_per_job,
                     " (coordinator flag --max_kv_bytes_per_job)"));
  }
  usage.entries = entries;
  usage.bytes = bytes;
  if (added) {
    data_.emplace(key, value);
  } else {
    it->second = value;
  }
  return absl::OkStatus();
}

void KvStore::ReleaseLocked(const std::string& key, const std::string& value) {
  auto it = usage_.find(KvScopeOf(key));
  if (it == usage_.end()) return;
  it->second.entries -= 1;
  it->second.bytes -= static_cast<int64_t>(key.size() + value.size());
  if (it->second.entries <= 0) usage_.erase(it);
}

absl::StatusOr<std::string> KvStore::Get(const std::string& key, absl::Time requested,
                                         const std::string& caller) {
  absl::MutexLock l(&mu_);
  auto ready = [&]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || data_.count(key) > 0; };
  const absl::Time now = clock_->Now();
  const absl::Time deadline = waits_.Clamp(now, requested);
  if (!ready() && deadline > now) {
    const std::string scope = KvScopeOf(key);
    if (absl::Status room =
            waits_.Acquire(scope, caller, absl::StrCat("GetKey \"", key, "\""), KvScopeName(scope));
        !room.ok()) {
      return room;
    }
    clock_->WaitUntil(&mu_, absl::Condition(&ready), deadline);
    waits_.Release(scope, caller);
  }
  if (shutdown_) return ShutdownError();
  auto it = data_.find(key);
  if (it == data_.end()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "key \"", key, "\" was not set by the deadline", waits_.ClampNote(now, requested),
        "; check that the task that publishes it is running and uses the same job "
        "and attempt"));
  }
  return it->second;
}

int KvStore::DeletePrefix(const std::string& prefix) {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (auto it = data_.lower_bound(prefix);
       it != data_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    ReleaseLocked(it->first, it->second);
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
