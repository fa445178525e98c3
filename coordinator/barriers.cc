#include "coordinator/barriers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/kv_store.h"

namespace lockstep {
namespace coordinator {

absl::Status Barriers::Arrive(const std::string& id, const std::string& member, int parties,
                              const std::vector<std::string>& expected, absl::Time requested,
                              const std::string& caller) {
  if (id.empty()) return absl::InvalidArgumentError("barrier_id: must not be empty");
  if (member.empty()) return absl::InvalidArgumentError("member: must not be empty");
  for (const auto& [field, name] :
       {std::pair<const char*, const std::string*>{"barrier_id", &id}, {"member", &member}}) {
    if (static_cast<int64_t>(name->size()) > limits_.max_name_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", name->size(), " bytes, over the limit of ", limits_.max_name_bytes));
    }
  }
  if (parties > limits_.max_parties ||
      static_cast<int64_t>(expected.size()) > limits_.max_parties) {
    return absl::InvalidArgumentError(absl::StrCat("barrier \"", id, "\": parties ",
                                                   std::max<int64_t>(parties, expected.size()),
                                                   " over the limit of ", limits_.max_parties));
  }
  std::set<std::string> expected_set(expected.begin(), expected.end());
  if (!expected_set.empty()) {
    if (parties == 0) parties = static_cast<int>(expected_set.size());
    if (parties != static_cast<int>(expected_set.size())) {
      return absl::InvalidArgumentError(absl::StrCat("barrier \"", id, "\": parties ", parties,
                                                     " but ", expected_set.size(),
                                                     " distinct members listed"));
    }
    if (!expected_set.count(member)) {
      return absl::InvalidArgumentError(absl::StrCat("barrier \"", id, "\": member \"", member,
                                                     "\" is not among the expected members"));
    }
  }
  if (parties < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier \"", id, "\": parties must be at least 1, got ", parties));
  }

  absl::MutexLock l(&mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  const std::string scope = KvScopeOf(id);
  if (barriers_.count(id) == 0 && per_scope_[scope] >= limits_.max_barriers_per_job) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "barrier \"", id, "\": ", KvScopeName(scope), " already holds ", per_scope_[scope],
        " barriers, the limit (coordinator flag --max_barriers_per_job)"));
  }
  auto [it, created] = barriers_.try_emplace(id);
  Barrier& b = it->second;
  if (created) {
    ++per_scope_[scope];
    b.parties = parties;
    b.expected = expected_set;
  } else if (b.parties != parties || (!expected_set.empty() && b.expected != expected_set)) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier \"", id, "\": member \"", member, "\" says ", parties,
                     " parties but earlier arrivals said ", b.parties,
                     "; every member must pass the same parties and members"));
  }
  if (b.complete) {
    if (b.arrived.count(member)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("barrier \"", id, "\" already completed; \"", member, "\" arrived too late"));
  }
  const bool new_member = b.arrived.insert(member).second;
  if (static_cast<int>(b.arrived.size()) >= b.parties) {
    b.complete = true;
    return absl::OkStatus();
  }
  const absl::Time now = clock_->Now();
  if (absl::Status room =
          waits_.Acquire(scope, caller, absl::StrCat("barrier \"", id, "\""), KvScopeName(scope));
      !room.ok()) {
    // Refused before it counts: a retry arrives afresh.
    if (new_member) b.arrived.erase(member);
    return room;
  }
  Barrier* bp = &b;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || bp->complete; };
  ++b.waiters;  // DeletePrefix leaves it alone until this wait is over
  clock_->WaitUntil(&mu_, absl::Condition(&done), waits_.Clamp(now, requested));
  waits_.Release(scope, caller);
  --b.waiters;
  if (b.complete) return absl::OkStatus();
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  std::string missing;
  if (!b.expected.empty()) {
    std::vector<std::string> names;
    for (const std::string& e : b.expected) {
      if (!b.arrived.count(e)) names.push_back(e);
    }
    missing = absl::StrCat("missing: ", absl::StrJoin(names, ", "));
  } else {
    missing = absl::StrCat("missing: ", b.parties - b.arrived.size(),
                           " more (member names were not declared)");
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "barrier \"", id, "\": ", b.arrived.size(), " of ", b.parties, " arrived by the deadline",
      waits_.ClampNote(now, requested), " (arrived: ", absl::StrJoin(b.arrived, ", "), "; ",
      missing, "); check that those tasks are ALIVE in `lockstep status`"));
}

int Barriers::size() {
  absl::MutexLock l(&mu_);
  return static_cast<int>(barriers_.size());
}

int Barriers::DeletePrefix(const std::string& prefix) {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (auto it = barriers_.lower_bound(prefix);
       it != barriers_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    // One still being waited on stays until its waiters return (at their deadline at the
    // latest: they belong to workers leaving the attempt).
    if (it->second.waiters == 0) {
      auto scope = per_scope_.find(KvScopeOf(it->first));
      if (scope != per_scope_.end() && --scope->second <= 0) per_scope_.erase(scope);
      it = barriers_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

void Barriers::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

}  // namespace coordinator
}  // namespace lockstep
