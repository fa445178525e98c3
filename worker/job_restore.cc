#include "worker/job_restore.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_bound.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "worker/job_chief.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {

std::vector<std::string> CheckpointDirs(const std::string& state_dir,
                                        const v1::Partition& partition) {
  std::vector<std::string> dirs;
  if (std::string copies = CheckpointCopyDir(state_dir, partition); !copies.empty()) {
    dirs.push_back(std::move(copies));
  }
  if (!partition.spec().checkpoint().dir().empty()) {
    dirs.push_back(partition.spec().checkpoint().dir());
  }
  return dirs;
}

std::optional<LocalCheckpoint> NewestLocalCheckpoint(const std::vector<std::string>& dirs,
                                                     absl::string_view job_uid) {
  std::optional<LocalCheckpoint> newest;
  for (const std::string& dir : dirs) {
    // Files named for the job only; the uid inside each is checked again below.
    absl::StatusOr<std::vector<std::string>> paths =
        checkpoint::CheckpointManager::ListOfJob(dir, job_uid);
    if (!paths.ok()) continue;  // no such directory on this host
    for (const std::string& path : *paths) {
      absl::StatusOr<v1::Checkpoint> c = checkpoint::CheckpointManager::ReadFile(path);
      if (!c.ok()) {
        spdlog::warn("restore: skipping {}: {}; trying the one before", path,
                     std::string(c.status().message()));
        continue;
      }
      if (c->job_uid() != job_uid) {
        spdlog::warn("restore: skipping {}: it belongs to job {}, not {}", path,
                     c->job_uid().empty() ? c->job_id() : c->job_uid(), std::string(job_uid));
        continue;
      }
      if (!newest.has_value() || c->global_step() > newest->checkpoint.global_step()) {
        newest = LocalCheckpoint{*std::move(c), path};
      }
      break;  // the newest whole one of this directory
    }
  }
  return newest;
}

absl::StatusOr<RestorePlan> AgreeOnRestore(collectives::Store& store, int rank, int num_workers,
                                           int64_t local_step, absl::Time deadline) {
  LS_RETURN_IF_ERROR(store.Set(absl::StrCat("restore/", rank), absl::StrCat(local_step)));
  RestorePlan plan;
  for (int r = 0; r < num_workers; ++r) {
    absl::StatusOr<std::string> value = store.Get(absl::StrCat("restore/", r), deadline);
    if (!value.ok()) {
      return Annotate(value.status(),
                      absl::StrCat("waiting for worker rank ", r, "'s newest checkpoint step"));
    }
    int64_t step = 0;
    if (!absl::SimpleAtoi(*value, &step) || step < 0) {
      return absl::DataLossError(absl::StrCat("worker rank ", r,
                                              " published a bad checkpoint step \"",
                                              absl::CHexEscape(*value), "\""));
    }
    if (step > plan.step) plan = RestorePlan{step, r};
  }
  return plan;
}

absl::StatusOr<collectives::BlobOptions> RestoreBlobOptions(const v1::Partition& partition,
                                                            int64_t step) {
  collectives::BlobOptions options;
  options.secret = partition.secret();
  options.label =
      absl::StrCat("the checkpoint of step ", step, " for ", partition.rendezvous_prefix());
  absl::StatusOr<int64_t> bound = checkpoint::CheckpointBytesBound(partition.spec());
  if (!bound.ok()) {
    return Annotate(bound.status(), absl::StrCat("job ", partition.job_id(),
                                                 ": bounding the checkpoints it can restore"));
  }
  options.max_bytes = *bound;
  options.bound_name = "the job's checkpoint bound (its variables and optimizer slots)";
  return options;
}

absl::StatusOr<Restored> RestoreAttempt(const v1::Partition& partition,
                                        const std::string& state_dir, collectives::Store& store,
                                        distribute::Strategy& strategy,
                                        distribute::Trainer& trainer, absl::Time deadline) {
  Restored restored;
  if (partition.attempt() <= 1) return restored;
  const std::string who =
      absl::StrCat("job ", partition.job_id(), " attempt ", partition.attempt());
  std::optional<LocalCheckpoint> local =
      NewestLocalCheckpoint(CheckpointDirs(state_dir, partition), partition.job_uid());
  const int64_t local_step = local.has_value() ? local->checkpoint.global_step() : 0;
  const int rank = WorkerRank(partition);
  const int workers = std::max(1, NumWorkers(partition));
  RestorePlan plan{local_step, local.has_value() ? rank : -1};
  if (workers > 1) {
    LS_ASSIGN_OR_RETURN(plan, AgreeOnRestore(store, rank, workers, local_step, deadline));
  }
  if (plan.step == 0) {
    spdlog::warn("{}: no worker holds a checkpoint of the job: starting from step 0", who);
    return restored;
  }
  // The source's file bytes, exactly as written, authenticated with the attempt's secret and
  // bounded by what the job's model can encode to; every receiver checks the CRCs again.
  // A source that cannot encode it still takes part (with nothing: the others fail to
  // decode it, and it names why), so that no rank waits in the broadcast.
  LS_ASSIGN_OR_RETURN(const collectives::BlobOptions blob,
                      RestoreBlobOptions(partition, plan.step));
  std::string bytes;
  absl::Status encoded;
  if (rank == plan.source) {
    absl::StatusOr<std::string> e = checkpoint::CheckpointManager::Encode(local->checkpoint);
    if (e.ok()) bytes = *std::move(e);
    encoded = e.status();
  }
  absl::Status sent = strategy.extended().BroadcastBytes(&bytes, plan.source, blob);
  if (!encoded.ok()) {
    return Annotate(encoded, absl::StrCat("sending the checkpoint of step ", plan.step));
  }
  if (!sent.ok()) {
    return Annotate(sent, absl::StrCat("receiving the checkpoint of step ", plan.step,
                                       " from worker rank ", plan.source));
  }
  absl::StatusOr<v1::Checkpoint> c = checkpoint::CheckpointManager::Decode(bytes);
  if (!c.ok()) {
    return Annotate(c.status(), absl::StrCat("the checkpoint of step ", plan.step,
                                             " received from worker rank ", plan.source));
  }
  if (c->global_step() != plan.step || c->job_uid() != partition.job_uid()) {
    return absl::DataLossError(absl::StrCat(
        "worker rank ", plan.source, " sent step ", c->global_step(), " of job ", c->job_uid(),
        ", not the agreed step ", plan.step, " of ", partition.job_uid()));
  }
  LS_RETURN_IF_ERROR(trainer.Restore(*c));
  LS_ASSIGN_OR_RETURN(restored.iterator_steps,
                      DecodeIteratorState(c->data_position().iterator_state()));
  restored.step = plan.step;
  restored.from = rank == plan.source
                      ? absl::StrCat("worker rank ", plan.source, "'s copy (", local->path, ")")
                      : absl::StrCat("worker rank ", plan.source, "'s copy");
  spdlog::info("{}: restored step {} from {}", who, restored.step, restored.from);
  return restored;
}

}  // namespace worker
}  // namespace lockstep
