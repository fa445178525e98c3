#include "coordinator/membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/incarnation.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {
namespace coordinator {
namespace {

bool KnownType(const std::string& t) {
  return t == "chief" || t == "worker" || t == "ps" || t == "evaluator";
}

}  // namespace

Membership::Membership(MembershipOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

std::string Membership::Describe(const Member& m, absl::Time now) const {
  return absl::StrFormat("%s (incarnation %s, address %s, last heartbeat %.1f s ago)",
                         m.task.ToString(), ShortIncarnation(m.incarnation), m.address,
                         absl::ToDoubleSeconds(now - m.last_heartbeat));
}

bool Membership::ExpireLocked(Member& m, absl::Time now) {
  if (m.state == v1::ALIVE && now - m.last_heartbeat > options_.heartbeat_timeout) {
    m.state = v1::LOST;
    return true;
  }
  return false;
}

std::vector<v1::TaskStatus> Membership::SweepLocked(absl::Time now) {
  std::vector<v1::TaskStatus> lost;
  for (auto& [task, m] : members_) {
    if (ExpireLocked(m, now)) lost.push_back(ToStatus(m, now));
  }
  return lost;
}

absl::StatusOr<TaskRef> Membership::AssignLocked(const RegisterRequest& request) {
  // A retried dynamic registration (same incarnation) gets the task it already has.
  for (const auto& [task, m] : members_) {
    if (m.incarnation == request.incarnation && m.identity == request.identity) return task;
  }
  // A restarted process takes back its identity's LOST worker task, rather than leaving it
  // bound and unused.
  if (!request.identity.empty()) {
    for (const auto& [task, m] : members_) {
      if (task.type == "worker" && m.state == v1::LOST && m.identity == request.identity) {
        return task;
      }
    }
  }
  for (int i = 0; i < options_.max_task_index; ++i) {
    auto it = members_.find(TaskRef{"worker", i});
    if (it == members_.end() || it->second.state == v1::DEREGISTERED) {
      return TaskRef{"worker", i};
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no free worker index: all ", options_.max_task_index,
      " are held; deregister stopped workers, `lockstep release` lost ones, or raise the "
      "coordinator's --max_task_index"));
}

absl::Status Membership::CheckBindingLocked(const TaskRef& task,
                                            const std::string& identity) const {
  if (identity.empty()) return absl::OkStatus();  // --insecure: nothing is bound
  auto it = members_.find(task);
  const bool bound =
      it != members_.end() && it->second.state != v1::DEREGISTERED && !it->second.identity.empty();
  if (bound && it->second.identity != identity) {
    return absl::PermissionDeniedError(absl::StrCat(
        "task ", task.ToString(), " is bound to identity \"", it->second.identity,
        "\", which registered it; \"", identity,
        "\" may not register it. A task is released when its holder deregisters cleanly or an "
        "operator runs `lockstep release ",
        task.ToString(), "`"));
  }
  if (bound) return absl::OkStatus();  // already this identity's: not one more
  std::vector<std::string> held;
  for (const auto& [t, m] : members_) {
    if (m.state != v1::DEREGISTERED && m.identity == identity) held.push_back(t.ToString());
  }
  if (static_cast<int>(held.size()) >= options_.max_tasks_per_identity) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "identity \"", identity, "\" already holds ", held.size(), " task(s) (",
        absl::StrJoin(held, ", "), "), the limit of the coordinator's --max_tasks_per_identity (",
        options_.max_tasks_per_identity, "); ", task.ToString(),
        " was refused. Deregister or `lockstep release` its stopped tasks, or raise the flag"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Registration> Membership::Register(const RegisterRequest& request) {
  // First: a worker of another version may mean anything by the fields below.
  LS_RETURN_IF_ERROR(CheckProtocolVersion(
      request.protocol_version,
      absl::StrCat(request.task.has_value() ? request.task->ToString() : "the worker", " at ",
                   request.address,
                   request.identity.empty() ? "" : absl::StrCat(" (", request.identity, ")"))));
  if (request.incarnation == 0) {
    return absl::InvalidArgumentError("incarnation: must be a non-zero random number");
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(request.address);
  if (!hp.ok()) return Annotate(hp.status(), "address");
  if (request.task.has_value()) {
    if (!KnownType(request.task->type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("task.type: \"", request.task->type,
                       "\" is unknown; expected chief, worker, ps or evaluator"));
    }
    if (request.task->index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("task.index: ", request.task->index, " is negative"));
    }
    if (request.task->index >= options_.max_task_index) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "task.index: ", request.task->index, " of ", request.task->ToString(),
          " is past the coordinator's --max_task_index (", options_.max_task_index, ": indexes 0..",
          options_.max_task_index - 1, "); use a smaller index or raise the flag"));
    }
  }

  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  SweepLocked(now);
  TaskRef task;
  if (request.task.has_value()) {
    task = *request.task;
  } else {
    LS_ASSIGN_OR_RETURN(task, AssignLocked(request));
  }
  LS_RETURN_IF_ERROR(CheckBindingLocked(task, request.identity));
  Registration out;
  for (const auto& [other, m] : members_) {
    if (other == task || m.state != v1::ALIVE || m.address != request.address) continue;
    if (m.identity != request.identity) {
      out.address_shared_with.push_back(other);  // another identity cannot keep us out
      continue;
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "address ", request.address, " requested by ", task.ToString(), " is already used by ",
        Describe(m, now), "; give every worker its own host:port"));
  }

  auto it = members_.find(task);
  if (it != members_.end() && it->second.incarnation == request.incarnation &&
      it->second.identity != request.identity) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", task.ToString(), " incarnation ",
                     ShortIncarnation(request.incarnation), " was registered by identity \"",
                     it->second.identity, "\", not \"", request.identity, "\""));
  }
  if (it != members_.end() && it->second.incarnation != request.incarnation) {
    Member& holder = it->second;
    if (holder.state == v1::ALIVE) {
      return absl::AlreadyExistsError(absl::StrCat(
          "task ", task.ToString(), " is held by a live process: ", Describe(holder, now),
          "; incarnation ", ShortIncarnation(request.incarnation),
          " was refused. Check for two lockstepd started with the same TF_CONFIG task; "
          "a restarted process is accepted once the old one is LOST (heartbeat timeout ",
          absl::FormatDuration(options_.heartbeat_timeout), ")"));
    }
    out.replaced_incarnation = holder.incarnation;
  }
  Member& m = members_[task];
  if (m.incarnation != request.incarnation) {
    m.registered = now;
    m.leaving = false;  // a new process
  }
  m.task = task;
  m.address = request.address;
  m.devices = request.devices;
  m.incarnation = request.incarnation;
  m.identity = request.identity;
  m.state = v1::ALIVE;
  m.last_heartbeat = now;

  out.task = task;
  out.cluster = ClusterLocked();
  return out;
}

absl::Status Membership::CheckHolder(const TaskRef& task, const std::string& identity,
                                     const std::string& action) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(task);
  if (it == members_.end() || identity.empty() || it->second.identity.empty() ||
      it->second.identity == identity) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("task ", task.ToString(), " is held by identity \"", it->second.identity,
                   "\"; \"", identity, "\" may not ", action, " it"));
}

absl::Status Membership::Heartbeat(const TaskRef& task, uint64_t incarnation, bool leaving,
                                   bool* drained) {
  absl::MutexLock l(&mu_);
  if (drained != nullptr) *drained = drained_.count(task) > 0;
  const absl::Time now = clock_->Now();
  auto it = members_.find(task);
  if (it == members_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task.ToString(),
                     " is not registered with this coordinator (did the coordinator restart?); "
                     "re-register"));
  }
  Member& m = it->second;
  if (m.incarnation != incarnation) {
    return absl::AbortedError(absl::StrCat(
        "incarnation ", ShortIncarnation(incarnation), " of ", task.ToString(), " was replaced by ",
        ShortIncarnation(m.incarnation), "; this process must stop its work and re-register"));
  }
  ExpireLocked(m, now);
  if (m.state == v1::LOST) {
    return absl::AbortedError(absl::StrFormat(
        "%s (incarnation %s) was marked LOST: no heartbeat for %.1f s (timeout %s); "
        "re-register",
        task.ToString(), ShortIncarnation(incarnation),
        absl::ToDoubleSeconds(now - m.last_heartbeat),
        absl::FormatDuration(options_.heartbeat_timeout)));
  }
  if (m.state == v1::DEREGISTERED) {
    return absl::AbortedError(
        absl::StrCat(task.ToString(), " deregistered; re-register to rejoin"));
  }
  m.last_heartbeat = now;
  m.leaving = m.leaving || leaving;
  return absl::OkStatus();
}

absl::Status Membership::Deregister(const TaskRef& task, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(task);
  if (it == members_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task.ToString(), " is not registered with this coordinator"));
  }
  if (it->second.incarnation != incarnation) {
    return absl::AbortedError(absl::StrCat(
        "incarnation ", ShortIncarnation(incarnation), " of ", task.ToString(), " was replaced by ",
        ShortIncarnation(it->second.incarnation), "; the newer process stays registered"));
  }
  it->second.state = v1::DEREGISTERED;
  return absl::OkStatus();
}

absl::StatusOr<v1::TaskStatus> Membership::Release(const TaskRef& task) {
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  auto it = members_.find(task);
  if (it == members_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task.ToString(), " is not registered with this coordinator"));
  }
  Member& m = it->second;
  ExpireLocked(m, now);
  if (m.state == v1::ALIVE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task.ToString(),
        " is ALIVE: releasing it would cut its process off; stop "
        "that process (it deregisters, which releases the task) or wait until it is LOST "
        "(heartbeat timeout ",
        absl::FormatDuration(options_.heartbeat_timeout), ")"));
  }
  m.state = v1::DEREGISTERED;
  return ToStatus(m, now);
}

std::string Membership::IdentityOf(const TaskRef& task) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(task);
  return it == members_.end() ? "" : it->second.identity;
}

absl::StatusOr<v1::TaskStatus> Membership::SetDraining(const TaskRef& task, bool draining) {
  if (task.type != "worker" && task.type != "chief") {
    return absl::InvalidArgumentError(absl::StrCat(
        "task: ", task.ToString(), " is not a training task (worker or chief): it runs no job"));
  }
  absl::MutexLock l(&mu_);
  auto it = members_.find(task);
  if (it == members_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task.ToString(), " is not registered with this coordinator"));
  }
  if (draining) {
    drained_.insert(task);
  } else {
    drained_.erase(task);
  }
  return ToStatus(it->second, clock_->Now());
}

std::vector<v1::TaskStatus> Membership::Sweep() {
  absl::MutexLock l(&mu_);
  return SweepLocked(clock_->Now());
}

std::vector<v1::TaskStatus> Membership::Snapshot() {
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  SweepLocked(now);
  std::vector<v1::TaskStatus> out;
  out.reserve(members_.size());
  for (const auto& [task, m] : members_) out.push_back(ToStatus(m, now));
  return out;
}

ClusterMap Membership::Cluster() {
  absl::MutexLock l(&mu_);
  return ClusterLocked();
}

ClusterMap Membership::ClusterLocked() const {
  ClusterMap cluster;
  for (const auto& [task, m] : members_) {
    if (m.state == v1::DEREGISTERED) continue;
    std::vector<std::string>& list = cluster[task.type];
    if (static_cast<int>(list.size()) <= task.index) list.resize(task.index + 1);
    list[task.index] = m.address;
  }
  return cluster;
}

v1::TaskStatus Membership::ToStatus(const Member& m, absl::Time now) const {
  v1::TaskStatus s;
  s.mutable_task()->set_type(m.task.type);
  s.mutable_task()->set_index(m.task.index);
  s.set_address(m.address);
  s.set_state(m.state);
  s.set_incarnation(m.incarnation);
  s.set_seconds_since_heartbeat(absl::ToDoubleSeconds(now - m.last_heartbeat));
  for (const v1::Device& d : m.devices) *s.add_devices() = d;
  s.set_registered_unix_micros(absl::ToUnixMicros(m.registered));
  s.set_draining(drained_.count(m.task) > 0 || m.leaving);
  return s;
}

}  // namespace coordinator
}  // namespace lockstep
