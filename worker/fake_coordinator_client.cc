#include "worker/fake_coordinator_client.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {

void FakeCoordinatorClient::Count(const std::string& rpc) {
  absl::MutexLock l(&mu_);
  ++calls_[rpc];
}

int FakeCoordinatorClient::calls(const std::string& rpc) const {
  absl::MutexLock l(&mu_);
  auto it = calls_.find(rpc);
  return it == calls_.end() ? 0 : it->second;
}

std::map<std::string, std::string> FakeCoordinatorClient::keys() const {
  absl::MutexLock l(&mu_);
  return kv_;
}

absl::StatusOr<v1::RegisterWorkerResponse> FakeCoordinatorClient::RegisterWorker(
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

absl::StatusOr<v1::HeartbeatResponse> FakeCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  Count("Heartbeat");
  if (on_heartbeat) {
    absl::Status s = on_heartbeat(request);
    if (!s.ok()) return s;
  }
  return v1::HeartbeatResponse();
}

absl::Status FakeCoordinatorClient::Deregister(const v1::DeregisterRequest& request) {
  Count("Deregister");
  return on_deregister ? on_deregister(request) : absl::OkStatus();
}

absl::Status FakeCoordinatorClient::SetKey(const std::string& key, const std::string& value,
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

absl::StatusOr<std::string> FakeCoordinatorClient::GetKey(const std::string& key,
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

absl::Status FakeCoordinatorClient::Barrier(const v1::BarrierRequest&) {
  Count("Barrier");
  return absl::OkStatus();
}

absl::StatusOr<v1::GetClusterStatusResponse> FakeCoordinatorClient::GetClusterStatus() {
  Count("GetClusterStatus");
  return v1::GetClusterStatusResponse();
}

}  // namespace worker
}  // namespace lockstep
