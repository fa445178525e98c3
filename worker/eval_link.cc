#include "worker/eval_link.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_bound.h"
#include "collectives/blob_broadcast.h"
#include "collectives/communicator_factory.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {
namespace {

constexpr int kChief = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<EvalLink>> EvalLink::Connect(const v1::Partition& partition,
                                                            collectives::Store* store,
                                                            const EvalLinkOptions& options) {
  if (IsChief(partition) == IsEvaluator(partition)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", partition.job_id(),
                     ": only the chief and the evaluator join the evaluator's link"));
  }
  if (partition.secret().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", partition.job_id(), ": the partition has no secret"));
  }
  // An abortable barrier first: the transports' connect and accept loops end only at their
  // deadline, the store's waits also at Abort() (an evaluator that never comes, an attempt
  // aborted while waiting for it).
  const int rank = IsChief(partition) ? kChief : 1;
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat("eval/ready/", rank), "ready"));
  absl::Status ready =
      store->Get(absl::StrCat("eval/ready/", 1 - rank), absl::Now() + options.connect_timeout)
          .status();
  if (!ready.ok()) {
    return Annotate(ready, IsChief(partition) ? "waiting for the job's evaluator to join"
                                              : "waiting for the job's chief to join");
  }
  collectives::CommunicatorConfig config;
  config.rank = rank;
  config.world_size = 2;
  config.transport = options.transport;
  config.secret = partition.secret();
  config.key_prefix = "eval";
  config.listen_host = options.listen_host;
  config.connect_timeout = options.connect_timeout;
  absl::StatusOr<std::unique_ptr<collectives::CollectiveCommunicator>> comm =
      collectives::CreateCommunicator(config, store);
  if (!comm.ok()) {
    return Annotate(comm.status(), IsChief(partition) ? "connecting to the job's evaluator"
                                                      : "connecting to the job's chief");
  }
  collectives::BlobOptions blob;
  blob.secret = partition.secret();
  blob.label = partition.rendezvous_prefix().empty() ? absl::StrCat("job ", partition.job_id())
                                                     : partition.rendezvous_prefix();
  blob.max_bytes = options.max_checkpoint_bytes;
  blob.bound_name = "the job's checkpoint bound (its variables and optimizer slots)";
  if (blob.max_bytes <= 0) {
    absl::StatusOr<int64_t> bound = checkpoint::CheckpointBytesBound(partition.spec());
    if (!bound.ok()) {
      return Annotate(bound.status(), absl::StrCat("job ", partition.job_id(),
                                                   ": bounding the checkpoints of its evaluator"));
    }
    blob.max_bytes = *bound;
  }
  return std::unique_ptr<EvalLink>(new EvalLink(std::move(*comm), std::move(blob)));
}

collectives::BlobOptions EvalLink::NextBlob() {
  collectives::BlobOptions o = blob_;
  // The sequence number is bound into the MAC: a checkpoint cannot be replayed or reordered.
  o.label = absl::StrCat("the evaluator's checkpoint #", ++sequence_, " of ", o.label);
  return o;
}

absl::Status EvalLink::Send(const std::string& bytes, absl::Time deadline) {
  std::optional<std::string> blob(bytes);
  return collectives::BroadcastBlob(*comm_, &blob, kChief, NextBlob(), deadline);
}

absl::Status EvalLink::SendEnd(absl::Time deadline) {
  std::optional<std::string> end;
  return collectives::BroadcastBlob(*comm_, &end, kChief, NextBlob(), deadline);
}

absl::StatusOr<std::optional<std::string>> EvalLink::Receive(absl::Time deadline) {
  std::optional<std::string> blob;
  LS_RETURN_IF_ERROR(collectives::BroadcastBlob(*comm_, &blob, kChief, NextBlob(), deadline));
  return blob;
}

void EvalLink::Abort() { comm_->Abort(); }

CheckpointSender::CheckpointSender(v1::Partition partition,
                                   std::unique_ptr<collectives::Store> store,
                                   EvalLinkOptions options, absl::Duration timeout, int min_queued,
                                   int64_t queue_budget_bytes)
    : partition_(std::move(partition)),
      store_(std::move(store)),
      options_(std::move(options)),
      timeout_(timeout),
      min_queued_(std::max(1, min_queued)),
      queue_budget_bytes_(queue_budget_bytes),
      thread_([this] { Run(); }) {}

CheckpointSender::~CheckpointSender() {
  Abort();
  thread_.join();
}

void CheckpointSender::Enqueue(std::string bytes) {
  absl::MutexLock l(&mu_);
  if (done_ || finishing_) return;
  const int64_t size = static_cast<int64_t>(bytes.size());
  while (static_cast<int>(queue_.size()) >= min_queued_ &&
         queued_bytes_ + size > queue_budget_bytes_) {
    spdlog::warn(
        "job {}: the evaluator is {} checkpoints ({} bytes) behind; the oldest unsent is "
        "skipped",
        partition_.job_id(), queue_.size(), queued_bytes_);
    queued_bytes_ -= static_cast<int64_t>(queue_.front().size());
    queue_.pop_front();
  }
  queued_bytes_ += size;
  queue_.push_back(std::move(bytes));
}

void CheckpointSender::Abort() {
  absl::MutexLock l(&mu_);
  aborted_ = true;
  store_->Abort();
  if (link_ != nullptr) link_->Abort();
}

absl::Status CheckpointSender::Finish(absl::Time deadline) {
  absl::MutexLock l(&mu_);
  finishing_ = true;
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    aborted_ = true;
    store_->Abort();
    if (link_ != nullptr) link_->Abort();
    return absl::DeadlineExceededError(absl::StrCat(
        "job ", partition_.job_id(), ": the evaluator did not take the last checkpoints in time"));
  }
  return error_;
}

void CheckpointSender::Run() {
  absl::StatusOr<std::unique_ptr<EvalLink>> link =
      EvalLink::Connect(partition_, store_.get(), options_);
  absl::Status status = link.status();
  if (status.ok()) {
    absl::MutexLock l(&mu_);
    if (aborted_) {
      status = absl::AbortedError("aborted");
    } else {
      link_ = link->get();
    }
  }
  while (status.ok()) {
    std::optional<std::string> next;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return aborted_ || finishing_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (aborted_) {
        status = absl::AbortedError("aborted");
        break;
      }
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= static_cast<int64_t>(next->size());
      }
    }
    const absl::Time deadline = absl::Now() + timeout_;
    if (!next.has_value()) {  // finishing, nothing left
      status = (*link)->SendEnd(deadline);
      break;
    }
    status = (*link)->Send(*next, deadline);
  }
  if (!status.ok() && !absl::IsAborted(status)) {
    spdlog::warn("job {}: checkpoints no longer reach the evaluator: {}", partition_.job_id(),
                 status.ToString());
  }
  absl::MutexLock l(&mu_);
  link_ = nullptr;
  error_ = status;
  done_ = true;
  // `link` is destroyed after this, outside Abort()'s reach (link_ is cleared).
}

}  // namespace worker
}  // namespace lockstep
