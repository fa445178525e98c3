#include "worker/agent.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/incarnation.h"
#include "common/protocol_version.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace worker {

const char* Agent::StateName(State s) {
  switch (s) {
    case State::kRegistering:
      return "REGISTERING";
    case State::kAlive:
      return "ALIVE";
    case State::kStopping:
      return "STOPPING";
    case State::kStopped:
      return "STOPPED";
    case State::kFailed:
      return "FAILED";
  }
  return "?";
}

Agent::Agent(AgentOptions options, WorkerServiceClient* client, Clock* clock)
    : options_(std::move(options)), client_(client), clock_(clock), task_(options_.task) {}

std::string Agent::Who() const {
  return absl::StrCat(task_.has_value() ? task_->ToString() : "unassigned task", " incarnation ",
                      ShortIncarnation(options_.incarnation));
}

void Agent::SetState(State next, const std::string& why) {
  if (next == state_) return;
  spdlog::info("{}: {} -> {}{}{}", Who(), StateName(state_), StateName(next),
               why.empty() ? "" : ": ", why);
  const bool was_alive = state_ == State::kAlive;
  state_ = next;
  if (options_.on_alive && was_alive != (next == State::kAlive)) options_.on_alive(!was_alive);
}

Agent::State Agent::state() const {
  absl::MutexLock l(&mu_);
  return state_;
}

std::optional<TaskRef> Agent::task() const {
  absl::MutexLock l(&mu_);
  return task_;
}

v1::RegisterWorkerResponse Agent::registration() const {
  absl::MutexLock l(&mu_);
  return registration_;
}

bool Agent::WaitForState(State s, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_ == s; };
  return clock_->WaitUntil(&mu_, absl::Condition(&reached), deadline);
}

void Agent::SetLeaving() {
  absl::MutexLock l(&mu_);
  leaving_ = true;
}

void Agent::Stop() {
  absl::MutexLock l(&mu_);
  stop_requested_ = true;
}

bool Agent::WaitOrStop(absl::Duration d) {
  absl::MutexLock l(&mu_);
  clock_->WaitUntil(&mu_, absl::Condition(&stop_requested_), clock_->Now() + d);
  return stop_requested_;
}

absl::Duration Agent::NextBackoff() {
  // Exponential with "equal jitter": half the step is fixed, half random, so that workers
  // started together do not retry in lockstep.
  absl::Duration step = options_.initial_backoff;
  for (int i = 0; i < failed_attempts_ && step < options_.max_backoff; ++i) step *= 2;
  step = std::min(step, options_.max_backoff);
  ++failed_attempts_;
  return step / 2 + absl::Uniform(rng_, 0.0, 1.0) * (step / 2);
}

absl::Status Agent::TryRegister() {
  v1::RegisterWorkerRequest request;
  {
    absl::MutexLock l(&mu_);
    if (task_.has_value()) {
      request.mutable_task()->set_type(task_->type);
      request.mutable_task()->set_index(task_->index);
    }
  }
  request.set_address(options_.address);
  for (const v1::Device& d : options_.devices) *request.add_devices() = d;
  request.set_incarnation(options_.incarnation);
  request.set_protocol_version(kProtocolVersion);

  absl::StatusOr<v1::RegisterWorkerResponse> r = client_->RegisterWorker(request);
  if (r.ok()) CheckCoordinatorIncarnation(r->coordinator_incarnation());
  absl::MutexLock l(&mu_);
  if (!r.ok()) {
    if (absl::IsAlreadyExists(r.status()) && !options_.task.has_value()) {
      task_.reset();  // our dynamic task was taken while we were away: ask for a new one
    }
    return r.status();
  }
  task_ = TaskRef{r->task().type(), r->task().index()};
  heartbeat_interval_ = absl::Milliseconds(std::max<int64_t>(1, r->heartbeat_interval_ms()));
  registration_ = *std::move(r);
  failed_attempts_ = 0;
  keep_jobs_ = false;
  coordinator_unreachable_ = false;
  SetState(State::kAlive,
           absl::StrCat("registered with coordinator ", client_->address(), ", address ",
                        options_.address, ", ", options_.devices.size(), " device(s)"));
  return absl::OkStatus();
}

void Agent::BeatOnce() {
  v1::HeartbeatRequest request;
  if (options_.jobs != nullptr) {
    for (v1::JobReport& r : options_.jobs->Reports()) *request.add_jobs() = std::move(r);
    for (v1::JobDiagnostics& d : options_.jobs->Diagnostics()) {
      *request.add_diagnostics() = std::move(d);
    }
  }
  {
    absl::MutexLock l(&mu_);
    request.mutable_task()->set_type(task_->type);
    request.mutable_task()->set_index(task_->index);
    request.set_leaving(leaving_);
  }
  request.set_incarnation(options_.incarnation);
  absl::StatusOr<v1::HeartbeatResponse> r = client_->Heartbeat(request);
  if (r.ok()) {
    CheckCoordinatorIncarnation(r->coordinator_incarnation());
    if (options_.jobs != nullptr) options_.jobs->ReportsDelivered();
  }
  absl::MutexLock l(&mu_);
  if (r.ok()) {
    if (coordinator_unreachable_) spdlog::info("{}: coordinator reachable again", Who());
    coordinator_unreachable_ = false;
    if (r->drained() != drained_) {
      drained_ = r->drained();
      spdlog::info(
          "{}: {}", Who(),
          drained_ ? "drained by an operator: no job is scheduled here" : "the drain was undone");
      if (options_.on_drained) options_.on_drained(drained_);
    }
    return;
  }
  if (absl::IsAborted(r.status()) || absl::IsNotFound(r.status())) {
    // NOT_FOUND: the coordinator does not know this task, so it restarted (membership is
    // not stored): keep the jobs, which it re-adopts from its stored attempts (or aborts).
    // ABORTED: this process was declared LOST or replaced: its jobs were given up.
    keep_jobs_ = absl::IsNotFound(r.status());
    SetState(State::kRegistering, std::string(r.status().message()));
    return;
  }
  // Unreachable: keep heartbeating; the coordinator decides when we are LOST.
  if (!coordinator_unreachable_) {
    spdlog::warn("{}: heartbeat failed: {}", Who(), r.status().ToString());
    coordinator_unreachable_ = true;
  }
}

void Agent::Deregister() {
  v1::DeregisterRequest request;
  {
    absl::MutexLock l(&mu_);
    request.mutable_task()->set_type(task_->type);
    request.mutable_task()->set_index(task_->index);
  }
  request.set_incarnation(options_.incarnation);
  absl::Status s = client_->Deregister(request);
  absl::MutexLock l(&mu_);
  if (!s.ok()) spdlog::warn("{}: deregistration failed (leaving anyway): {}", Who(), s.ToString());
}

Agent::~Agent() { StopWatch("the agent is destroyed"); }

void Agent::CheckCoordinatorIncarnation(uint64_t incarnation) {
  if (incarnation == 0) return;
  uint64_t before;
  {
    absl::MutexLock l(&mu_);
    before = coordinator_incarnation_;
    coordinator_incarnation_ = incarnation;
    if (before != 0 && before != incarnation) {
      spdlog::warn(
          "{}: coordinator restarted (incarnation {:x} -> {:x}): its jobs go on; it "
          "re-adopts them from its stored attempts or aborts them",
          Who(), before, incarnation);
    }
  }
}

void Agent::StartWatch() {
  if (options_.jobs == nullptr || watch_thread_.joinable()) return;
  {
    absl::MutexLock l(&mu_);
    watch_stop_ = false;
  }
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

void Agent::StopWatch(const std::string& why, bool drop_jobs) {
  if (!watch_thread_.joinable()) return;
  {
    absl::MutexLock l(&mu_);
    watch_stop_ = true;
    if (stream_ != nullptr) stream_->Cancel();
  }
  watch_thread_.join();
  if (drop_jobs) options_.jobs->DropAll(why);
}

void Agent::WatchLoop() {
  absl::Duration backoff = options_.initial_backoff;
  bool failing = false;
  while (true) {
    v1::WatchAssignmentsRequest request;
    {
      absl::MutexLock l(&mu_);
      if (watch_stop_) return;
      request.mutable_task()->set_type(task_->type);
      request.mutable_task()->set_index(task_->index);
    }
    request.set_incarnation(options_.incarnation);
    absl::StatusOr<std::unique_ptr<AssignmentStream>> stream = client_->WatchAssignments(request);
    absl::Status error = stream.status();
    if (stream.ok()) {
      {
        absl::MutexLock l(&mu_);
        if (watch_stop_) return;
        stream_ = stream->get();
      }
      while (true) {
        absl::StatusOr<std::optional<v1::Assignment>> next = (*stream)->Next();
        if (!next.ok()) {
          error = next.status();
          break;
        }
        if (!next->has_value()) break;
        backoff = options_.initial_backoff;
        failing = false;
        options_.jobs->Handle(**next);
      }
      absl::MutexLock l(&mu_);
      stream_ = nullptr;
    }
    absl::MutexLock l(&mu_);
    if (watch_stop_) return;
    if (!error.ok() && !failing) {
      spdlog::warn("{}: assignment stream failed, reopening with backoff: {}", Who(),
                   error.ToString());
      failing = true;
    }
    clock_->WaitUntil(&mu_, absl::Condition(&watch_stop_), clock_->Now() + backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status Agent::Run() {
  while (true) {
    State state;
    bool stop;
    {
      absl::MutexLock l(&mu_);
      state = state_;
      stop = stop_requested_;
      if (stop && state == State::kRegistering) {
        SetState(State::kStopped, "stopped before registering");
        return absl::OkStatus();
      }
      if (stop && state == State::kAlive) {
        SetState(State::kStopping, "stop requested");
        state = State::kStopping;
      }
    }
    if (state == State::kAlive) {
      StartWatch();
    } else {
      bool keep_jobs;
      {
        absl::MutexLock l(&mu_);
        keep_jobs = keep_jobs_ && state == State::kRegistering;
      }
      StopWatch(state == State::kRegistering
                    ? "the coordinator no longer counts this worker as alive (LOST or replaced)"
                    : "the worker is stopping",
                /*drop_jobs=*/!keep_jobs);
    }
    switch (state) {
      case State::kRegistering: {
        absl::Status s = TryRegister();
        if (s.ok()) break;
        if (absl::IsInvalidArgument(s)) {
          absl::MutexLock l(&mu_);
          SetState(State::kFailed, std::string(s.message()));
          return s;
        }
        absl::Duration wait;
        {
          absl::MutexLock l(&mu_);
          wait = NextBackoff();
          spdlog::warn("{}: registration failed, retrying in {}: {}", Who(),
                       absl::FormatDuration(wait), s.ToString());
        }
        WaitOrStop(wait);
        break;
      }
      case State::kAlive: {
        absl::Duration interval;
        {
          absl::MutexLock l(&mu_);
          interval = heartbeat_interval_;
        }
        if (WaitOrStop(interval)) break;
        BeatOnce();
        break;
      }
      case State::kStopping: {
        Deregister();
        absl::MutexLock l(&mu_);
        SetState(State::kStopped, "deregistered");
        return absl::OkStatus();
      }
      case State::kStopped:
        return absl::OkStatus();
      case State::kFailed:
        return absl::FailedPreconditionError("agent failed earlier");
    }
  }
}

}  // namespace worker
}  // namespace lockstep
