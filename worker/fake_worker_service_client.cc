#include "worker/fake_worker_service_client.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {

void FakeWorkerServiceClient::Count(const std::string& rpc) {
  absl::MutexLock l(&mu_);
  ++calls_[rpc];
}

int FakeWorkerServiceClient::calls(const std::string& rpc) const {
  absl::MutexLock l(&mu_);
  auto it = calls_.find(rpc);
  return it == calls_.end() ? 0 : it->second;
}

std::map<std::string, std::string> FakeWorkerServiceClient::keys() const {
  absl::MutexLock l(&mu_);
  return kv_;
}

absl::StatusOr<v1::RegisterWorkerResponse> FakeWorkerServiceClient::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  Count("RegisterWorker");
  if (on_register) return on_register(request);
  v1::RegisterWorkerResponse r;
  *r.mutable_task() = request.task();
  if (!request.has_task()) r.mutable_task()->set_type("worker");
  r.set_heartbeat_interval_ms(1);
  r.set_heartbeat_timeout_ms(10);
  return r;
}

absl::StatusOr<v1::HeartbeatResponse> FakeWorkerServiceClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  Count("Heartbeat");
  if (on_heartbeat) {
    absl::Status s = on_heartbeat(request);
    if (!s.ok()) return s;
  }
  v1::HeartbeatResponse response;
  absl::MutexLock l(&mu_);
  heartbeats_.push_back(request);
  response.set_coordinator_incarnation(coordinator_incarnation_);
  return response;
}

absl::Status FakeWorkerServiceClient::Deregister(const v1::DeregisterRequest& request) {
  Count("Deregister");
  {
    absl::MutexLock l(&mu_);
    deregisters_.push_back(request);
  }
  return on_deregister ? on_deregister(request) : absl::OkStatus();
}

absl::Status FakeWorkerServiceClient::SetKey(const std::string& key, const std::string& value,
                                             bool overwrite) {
  Count("SetKey");
  absl::MutexLock l(&mu_);
  auto [it, inserted] = kv_.emplace(key, value);
  if (!inserted && !overwrite) {
    return absl::AlreadyExistsError(absl::StrCat("key \"", key, "\" is already set"));
  }
  it->second = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeWorkerServiceClient::GetKey(const std::string& key,
                                                            absl::Duration timeout) {
  Count("GetKey");
  if (on_get_key) on_get_key(key);
  {
    absl::MutexLock l(&mu_);
    if (clock_ == nullptr) {
      // Real time: wait for the key as the coordinator does (threads of one test rendezvous).
      auto present = [this, &key]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return kv_.count(key) > 0; };
      mu_.AwaitWithTimeout(absl::Condition(&present), timeout);
    }
    auto it = kv_.find(key);
    if (it != kv_.end()) return it->second;
  }
  if (clock_ != nullptr) clock_->Advance(timeout);
  return absl::DeadlineExceededError(absl::StrCat("key \"", key, "\" was not set"));
}

absl::Status FakeWorkerServiceClient::Barrier(const v1::BarrierRequest& request) {
  Count("Barrier");
  {
    absl::MutexLock l(&mu_);
    barriers_.push_back(request);
  }
  return on_barrier ? on_barrier(request) : absl::OkStatus();
}

class FakeWorkerServiceClient::Stream final : public AssignmentStream {
 public:
  Stream(FakeWorkerServiceClient* fake, int64_t generation)
      : fake_(fake), generation_(generation) {}

  absl::StatusOr<std::optional<v1::Assignment>> Next() override {
    absl::MutexLock l(&fake_->mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(fake_->mu_) {
      return cancelled_ || fake_->stream_generation_ != generation_ || !fake_->assignments_.empty();
    };
    fake_->mu_.Await(absl::Condition(&ready));
    if (cancelled_) return std::optional<v1::Assignment>();
    if (fake_->stream_generation_ != generation_) return fake_->break_status_;
    v1::Assignment a = std::move(fake_->assignments_.front());
    fake_->assignments_.pop_front();
    return std::optional<v1::Assignment>(std::move(a));
  }
  void Cancel() override {
    absl::MutexLock l(&fake_->mu_);
    cancelled_ = true;
  }

 private:
  FakeWorkerServiceClient* const fake_;
  const int64_t generation_;
  bool cancelled_ ABSL_GUARDED_BY(fake_->mu_) = false;
};

absl::StatusOr<std::unique_ptr<AssignmentStream>> FakeWorkerServiceClient::WatchAssignments(
    const v1::WatchAssignmentsRequest&) {
  Count("WatchAssignments");
  absl::MutexLock l(&mu_);
  return std::unique_ptr<AssignmentStream>(std::make_unique<Stream>(this, stream_generation_));
}

void FakeWorkerServiceClient::PushAssignment(v1::Assignment assignment) {
  absl::MutexLock l(&mu_);
  assignments_.push_back(std::move(assignment));
}

void FakeWorkerServiceClient::BreakStreams(absl::Status status) {
  absl::MutexLock l(&mu_);
  break_status_ = std::move(status);
  ++stream_generation_;
}

void FakeWorkerServiceClient::set_coordinator_incarnation(uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  coordinator_incarnation_ = incarnation;
}

std::vector<v1::HeartbeatRequest> FakeWorkerServiceClient::heartbeats() const {
  absl::MutexLock l(&mu_);
  return heartbeats_;
}

std::vector<v1::DeregisterRequest> FakeWorkerServiceClient::deregisters() const {
  absl::MutexLock l(&mu_);
  return deregisters_;
}

std::vector<v1::BarrierRequest> FakeWorkerServiceClient::barriers() const {
  absl::MutexLock l(&mu_);
  return barriers_;
}

}  // namespace worker
}  // namespace lockstep
