#include "coordinator/checkpoint_fetch.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_bound.h"
#include "checkpoint/checkpoint_stream.h"
#include "common/secure_random.h"
#include "coordinator/job_service.h"
#include "coordinator/membership.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

absl::StatusOr<v1::GetJobResponse> JobServiceFetchCluster::Job(const std::string& id) {
  return jobs_->Get(id);
}

absl::Status JobServiceFetchCluster::Send(const TaskRef& task, v1::Assignment directive) {
  return jobs_->SendDirective(task, std::move(directive));
}

std::string JobServiceFetchCluster::IdentityOf(const TaskRef& task) {
  return membership_->IdentityOf(task);
}

CheckpointFetch::CheckpointFetch(FetchCluster* cluster, Clock* clock,
                                 CheckpointFetchOptions options)
    : cluster_(cluster), clock_(clock), options_(options) {}

bool CheckpointFetch::WaitLocked(const absl::Condition& cond, absl::Time deadline,
                                 absl::FunctionRef<bool()> client_gone) {
  while (!cond.Eval()) {
    const absl::Time now = clock_->Now();
    if (now >= deadline || client_gone()) return false;
    clock_->WaitUntil(&mu_, cond, std::min(deadline, now + options_.poll));
  }
  return true;
}

absl::Status CheckpointFetch::FailLocked(Transfer& t, absl::Status why) {
  using S = Transfer::State;
  if (t.state == S::kAsked || t.state == S::kStreaming) {
    t.state = S::kFailed;
    t.why = why;
  }
  return why;
}

absl::Status CheckpointFetch::Fetch(const v1::FetchCheckpointRequest& request,
                                    absl::FunctionRef<bool(const v1::CheckpointChunk&)> write,
                                    absl::FunctionRef<bool()> client_gone) {
  using S = Transfer::State;
  if (request.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: ", request.step(), " is no step (0: the newest checkpoint)"));
  }
  {
    absl::MutexLock l(&mu_);
    if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
    if (running_ >= options_.max_fetches) {
      return absl::ResourceExhaustedError(
          absl::StrCat(options_.max_fetches, " checkpoint fetches run already: try again later"));
    }
    ++running_;
  }
  absl::Cleanup done = [this] {
    absl::MutexLock l(&mu_);
    --running_;
  };
  absl::StatusOr<v1::GetJobResponse> job = cluster_->Job(request.job_id());
  if (!job.ok()) return job.status();
  const v1::JobRecord& record = job->job();
  const std::string wanted = request.step() == 0
                                 ? "its newest checkpoint"
                                 : absl::StrCat("its checkpoint of step ", request.step());
  if (record.attempt_workers_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", record.id(), " is ", v1::JobState_Name(record.state()),
                     " and never ran on a worker: it has no checkpoint"));
  }
  absl::StatusOr<int64_t> bound = checkpoint::CheckpointBytesBound(job->spec());
  if (!bound.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", record.id(), ": its spec gives no checkpoint bound: ", bound.status().message()));
  }
  std::vector<std::string> tried;
  bool any_connected = false;
  for (int rank = 0; rank < record.attempt_workers_size(); ++rank) {
    const v1::AttemptWorkerRecord& w = record.attempt_workers(rank);
    const TaskRef holder{w.task_type(), w.task_index()};
    const std::string who = absl::StrCat(holder.ToString(), rank == 0 ? " (the chief)" : "");
    auto t = std::make_shared<Transfer>();
    t->id = SecureRandomHex(16);
    t->job_id = record.id();
    t->job_uid = JobUid(record);
    t->holder = holder;
    t->step = request.step();
    t->bound = *bound;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
      transfers_[t->id] = t;
    }
    absl::Cleanup forget = [this, t] {
      absl::MutexLock l(&mu_);
      if (t->state != S::kDone && t->state != S::kDeclined && t->state != S::kFailed) {
        t->state = S::kAbandoned;
      }
      transfers_.erase(t->id);
    };
    v1::Assignment directive;
    v1::UploadCheckpoint* u = directive.mutable_upload_checkpoint();
    u->set_fetch_id(t->id);
    u->mutable_task()->set_type(holder.type);
    u->mutable_task()->set_index(holder.index);
    u->set_job_id(record.id());
    u->set_job_uid(t->job_uid);
    u->set_checkpoint_dir(job->spec().checkpoint().dir());
    u->set_step(request.step());
    u->set_max_bytes(*bound);
    if (absl::Status sent = cluster_->Send(holder, std::move(directive)); !sent.ok()) {
      tried.push_back(absl::StrCat(who, ": ", sent.message()));
      continue;
    }
    any_connected = true;
    absl::MutexLock l(&mu_);
    auto answered = [&t, this]() { return shutdown_ || t->state != S::kAsked; };
    if (!WaitLocked(absl::Condition(&answered), clock_->Now() + options_.start_timeout,
                    client_gone)) {
      if (client_gone()) return absl::CancelledError("the client went away");
      tried.push_back(absl::StrCat(who, ": did not answer within ",
                                   absl::FormatDuration(options_.start_timeout),
                                   " (is its lockstepd older than this coordinator, or stuck?)"));
      continue;
    }
    if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
    if (t->state == S::kDeclined) {
      tried.push_back(absl::StrCat(who, ": ", t->why.message()));
      continue;
    }
    spdlog::info("job {}: relaying {} from {} ({} bytes, {})", record.id(), wanted, who,
                 t->header.total_bytes(), t->header.source_file());
    mu_.Unlock();
    absl::Status relayed = Relay(*t, write, client_gone);
    mu_.Lock();
    if (!relayed.ok()) {
      spdlog::warn("job {}: fetching {} from {} failed: {}", record.id(), wanted, who,
                   relayed.ToString());
    }
    return relayed;
  }
  const std::string message =
      absl::StrCat("job ", record.id(), ": no worker of its last attempt (", record.attempt(),
                   ") sent ", wanted, ": ", absl::StrJoin(tried, "; "));
  return any_connected ? absl::FailedPreconditionError(message) : absl::UnavailableError(message);
}

absl::Status CheckpointFetch::Relay(Transfer& t,
                                    absl::FunctionRef<bool(const v1::CheckpointChunk&)> write,
                                    absl::FunctionRef<bool()> client_gone) {
  using S = Transfer::State;
  v1::CheckpointChunk header;
  {
    absl::MutexLock l(&mu_);
    header = t.header;
  }
  if (!write(header)) return absl::CancelledError("the client went away");
  int64_t relayed = 0;
  for (;;) {
    v1::CheckpointChunk chunk;
    {
      absl::MutexLock l(&mu_);
      auto ready = [&t, this]() { return shutdown_ || !t.queue.empty() || t.state == S::kFailed; };
      if (!WaitLocked(absl::Condition(&ready), clock_->Now() + options_.stall_timeout,
                      client_gone)) {
        t.state = S::kAbandoned;
        if (client_gone()) return absl::CancelledError("the client went away");
        return absl::DeadlineExceededError(absl::StrCat(
            "job ", t.job_id, ": ", t.holder.ToString(), " sent nothing for ",
            absl::FormatDuration(options_.stall_timeout), " (", relayed, " of ",
            t.header.total_bytes(), " bytes relayed): check its lockstepd and network"));
      }
      if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
      if (t.queue.empty()) return t.why;  // kFailed, everything before it relayed
      chunk = std::move(t.queue.front());
      t.queue.pop_front();
    }
    relayed += static_cast<int64_t>(chunk.data().size());
    if (!write(chunk)) {
      absl::MutexLock l(&mu_);
      t.state = S::kAbandoned;
      return absl::CancelledError("the client went away");
    }
    if (chunk.last()) return absl::OkStatus();
  }
}

absl::Status CheckpointFetch::Push(Transfer& t, v1::CheckpointChunk chunk) {
  using S = Transfer::State;
  absl::MutexLock l(&mu_);
  auto room = [&t, this]() {
    return shutdown_ || t.state == S::kAbandoned ||
           static_cast<int>(t.queue.size()) < options_.queue_chunks;
  };
  if (!WaitLocked(absl::Condition(&room), clock_->Now() + options_.stall_timeout,
                  [] { return false; })) {
    return FailLocked(t, absl::DeadlineExceededError(absl::StrCat(
                             "job ", t.job_id, ": the client took none of the checkpoint for ",
                             absl::FormatDuration(options_.stall_timeout))));
  }
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (t.state == S::kAbandoned) {
    return absl::CancelledError(
        absl::StrCat("the client fetching job ", t.job_id, "'s checkpoint went away"));
  }
  t.queue.push_back(std::move(chunk));
  return absl::OkStatus();
}

absl::Status CheckpointFetch::Upload(const std::string& identity,
                                     absl::FunctionRef<bool(v1::CheckpointUploadChunk*)> read) {
  using S = Transfer::State;
  v1::CheckpointUploadChunk first;
  if (!read(&first)) return absl::InvalidArgumentError("an upload with no message");
  std::shared_ptr<Transfer> found;
  {
    absl::MutexLock l(&mu_);
    if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
    if (auto it = transfers_.find(first.fetch_id()); it != transfers_.end()) found = it->second;
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        "no checkpoint fetch waits for this upload: it ended or timed out (fetch_id)");
  }
  Transfer& t = *found;
  const TaskRef task{first.task().type(), first.task().index()};
  if (task != t.holder) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the fetch of job ", t.job_id, " asked ", t.holder.ToString(), ", not ", task.ToString()));
  }
  if (const std::string owner = cluster_->IdentityOf(t.holder);
      !identity.empty() && owner != identity) {
    return absl::PermissionDeniedError(
        absl::StrCat("identity ", identity, " does not hold ", t.holder.ToString(), " (",
                     owner.empty() ? "no identity" : owner, " does): it may not upload job ",
                     t.job_id, "'s checkpoint"));
  }
  const std::string who = absl::StrCat("job ", t.job_id, ": ", t.holder.ToString());
  {
    absl::MutexLock l(&mu_);
    if (t.state != S::kAsked) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " answered this fetch already (or the fetch gave up on it)"));
    }
    absl::Status declined;
    if (first.error_code() != 0) {
      declined =
          absl::Status(static_cast<absl::StatusCode>(first.error_code()), first.error_message());
    } else if (t.step != 0 && first.step() != t.step) {
      declined = absl::NotFoundError(absl::StrCat("offered step ", first.step(), ", not ", t.step));
    } else if (first.total_bytes() <= 0) {
      declined = absl::InvalidArgumentError("announced an empty checkpoint (total_bytes)");
    } else if (first.total_bytes() > t.bound) {
      declined = absl::ResourceExhaustedError(absl::StrCat(
          "its checkpoint ", first.file(), " is ", first.total_bytes(),
          " bytes, over the job's bound of ", t.bound, " bytes (CheckpointBytesBound)"));
    }
    if (!declined.ok()) {
      t.state = S::kDeclined;
      t.why = declined;
      return first.error_code() != 0 ? absl::OkStatus() : declined;
    }
    t.header.set_step(first.step());
    t.header.set_total_bytes(first.total_bytes());
    t.header.mutable_source()->set_type(t.holder.type);
    t.header.mutable_source()->set_index(t.holder.index);
    t.header.set_source_file(first.file());
    t.state = S::kStreaming;
  }
  checkpoint::CheckpointStreamCheck check(static_cast<uint64_t>(first.total_bytes()));
  auto fail = [&](absl::Status why) {
    absl::MutexLock l(&mu_);
    return FailLocked(t, std::move(why));
  };
  std::optional<v1::CheckpointChunk> held;  // the newest chunk, sent once the next one came
  int64_t offset = 0;
  bool last = false;
  v1::CheckpointUploadChunk m;
  while (!last && read(&m)) {
    if (absl::Status s = check.Feed(m.data()); !s.ok()) {
      return fail(absl::DataLossError(
          absl::StrCat(who, "'s checkpoint ", first.file(), ": ", s.message())));
    }
    if (held.has_value()) {
      if (absl::Status s = Push(t, *std::move(held)); !s.ok()) return s;
    }
    held.emplace();
    held->set_offset(offset);
    offset += static_cast<int64_t>(m.data().size());
    *held->mutable_data() = std::move(*m.mutable_data());
    last = m.last();
  }
  if (!last) {
    return fail(
        absl::UnavailableError(absl::StrCat(who, " stopped sending its checkpoint after ",
                                            check.received(), " of ", first.total_bytes(),
                                            " bytes: did its lockstepd stop? (ask again: another "
                                            "worker of the job may hold a copy)")));
  }
  if (absl::Status s = check.Finish(); !s.ok()) {
    return fail(
        absl::DataLossError(absl::StrCat(who, "'s checkpoint ", first.file(), ": ", s.message())));
  }
  if (const auto& meta = check.metadata(); meta.has_value()) {
    if (meta->job_uid() != t.job_uid || meta->global_step() != first.step()) {
      return fail(absl::DataLossError(absl::StrCat(
          who, "'s checkpoint ", first.file(), " is step ", meta->global_step(), " of job \"",
          meta->job_uid(), "\", not step ", first.step(), " of \"", t.job_uid, "\"")));
    }
  }
  held->set_last(true);
  if (absl::Status s = Push(t, *std::move(held)); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  if (t.state == S::kStreaming) t.state = S::kDone;
  return absl::OkStatus();
}

void CheckpointFetch::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

}  // namespace coordinator
}  // namespace lockstep
