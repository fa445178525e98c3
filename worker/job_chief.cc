#include "worker/job_chief.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_copies.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {

absl::StatusOr<std::unique_ptr<JobChief>> JobChief::Create(const v1::Partition& partition,
                                                           Clock* clock,
                                                           const std::string& state_dir,
                                                           int retained_copy_jobs) {
  std::unique_ptr<JobChief> chief(new JobChief(partition, clock));
  if (const std::string copies = CheckpointCopyDir(state_dir, partition); !copies.empty()) {
    // Other jobs' copies beyond the retention go before this job writes its own.
    const std::string folder = copies.substr(copies.rfind('/') + 1);
    absl::StatusOr<std::vector<std::string>> deleted =
        PruneCheckpointCopies(state_dir, folder, retained_copy_jobs);
    if (!deleted.ok()) {
      spdlog::warn("job {}: deleting the checkpoint copies of ended jobs: {}", partition.job_id(),
                   deleted.status().ToString());
    } else if (!deleted->empty()) {
      spdlog::info(
          "job {}: deleted the checkpoint copies of {} ended job(s) beyond "
          "--retained_checkpoint_copies={}: {}",
          partition.job_id(), deleted->size(), retained_copy_jobs, absl::StrJoin(*deleted, ", "));
    }
  }
  const v1::JobSpec& spec = partition.spec();
  const int keep = partition.plan().checkpoint().keep();
  const int copies = partition.plan().checkpoint().copies();
  if (IsChief(partition) && !spec.checkpoint().dir().empty()) {
    // The checkpoints users see, which are also the chief's own copy.
    checkpoint::CheckpointManager::Options co;
    co.dir = spec.checkpoint().dir();
    co.keep_last = keep;
    co.job_uid = partition.job_uid();
    co.attempt = partition.attempt();
    LS_ASSIGN_OR_RETURN(chief->checkpoints_, checkpoint::CheckpointManager::Create(co));
  } else if (const std::string dir = CheckpointCopyDir(state_dir, partition);
             !dir.empty() && (copies == 0 || WorkerRank(partition) < copies)) {
    checkpoint::CheckpointManager::Options co;
    co.dir = dir;
    co.keep_last = keep;
    co.dir_field = "lockstepd --state_dir";
    co.job_uid = partition.job_uid();
    co.attempt = partition.attempt();
    absl::StatusOr<std::unique_ptr<checkpoint::CheckpointManager>> m =
        checkpoint::CheckpointManager::Create(co);
    if (m.ok()) {
      chief->checkpoints_ = std::move(*m);
    } else {
      // The job trains on; only a restart that needs this worker's copy would miss it.
      spdlog::warn("job {}: this worker keeps no copy of the checkpoints: {}", partition.job_id(),
                   std::string(m.status().message()));
    }
  }
  if (!IsChief(partition)) return chief;
  if (!spec.summaries().dir().empty()) {
    chief::EventWriter::Options eo;
    eo.dir = spec.summaries().dir();
    eo.filename_suffix = absl::StrCat(".", partition.job_id(), ".", partition.attempt());
    eo.clock = clock;
    LS_ASSIGN_OR_RETURN(chief->events_, chief::EventWriter::Create(eo));
    chief->summary_dir_ = spec.summaries().dir();
  }
  return chief;
}

namespace {

constexpr absl::string_view kIteratorStatePrefix = "steps_returned=";

}  // namespace

std::string CheckpointCopyDir(const std::string& state_dir, const v1::Partition& partition) {
  if (state_dir.empty()) return "";
  const std::string& uid = partition.job_uid().empty() ? partition.job_id() : partition.job_uid();
  return absl::StrCat(state_dir, "/checkpoints/", uid);
}

v1::DataPosition DataPositionAfter(int64_t batches, const TrainEpoch& epoch,
                                   int64_t iterator_steps) {
  v1::DataPosition position;
  position.set_iterator_state(EncodeIteratorState(iterator_steps));
  if (epoch.steps_per_epoch > 0) {
    position.set_epoch(batches / epoch.steps_per_epoch);
    position.set_element(batches % epoch.steps_per_epoch * epoch.examples_per_step);
  }
  return position;
}

std::string EncodeIteratorState(int64_t steps_returned) {
  return absl::StrCat(kIteratorStatePrefix, steps_returned);
}

absl::StatusOr<int64_t> DecodeIteratorState(absl::string_view state) {
  int64_t steps = -1;
  if (!absl::ConsumePrefix(&state, kIteratorStatePrefix) || !absl::SimpleAtoi(state, &steps) ||
      steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("data_position.iterator_state: expected \"",
                                                   kIteratorStatePrefix, "<steps>\", got \"",
                                                   absl::CHexEscape(state),
                                                   "\" (a checkpoint written by "
                                                   "another version of lockstepd?)"));
  }
  return steps;
}

absl::StatusOr<std::string> JobChief::SaveCheckpoint(int64_t step,
                                                     const distribute::Trainer& trainer,
                                                     const v1::DataPosition& position) {
  if (checkpoints_ == nullptr && evaluator_ == nullptr) return std::string();
  v1::Checkpoint c;
  c.set_job_id(job_id_);
  c.set_job_uid(job_uid_);
  c.set_attempt(attempt_);
  c.set_global_step(step);
  // On the host (GPU replicas' variables are copied back from the device).
  LS_ASSIGN_OR_RETURN(std::vector<engine::Tensor> values, trainer.HostVariables());
  for (size_t i = 0; i < values.size(); ++i) {
    *c.add_variables() = values[i].ToNamedProto(trainer.variables()[i].name());
  }
  for (v1::NamedTensor& slot : trainer.optimizer().SaveState()) {
    *c.add_optimizer_slots() = std::move(slot);
  }
  *c.mutable_data_position() = position;
  c.set_created_unix_micros(absl::ToUnixMicros(clock_->Now()));
  if (evaluator_ != nullptr) {
    LS_ASSIGN_OR_RETURN(std::string bytes, checkpoint::CheckpointManager::Encode(c));
    evaluator_->Enqueue(std::move(bytes));
  }
  if (checkpoints_ == nullptr) return std::string();
  return checkpoints_->Save(c);
}

absl::Status JobChief::AddScalars(int64_t step,
                                  const std::vector<std::pair<std::string, float>>& scalars) {
  if (events_ == nullptr) return absl::OkStatus();
  return events_->AddScalars(step, scalars);
}

absl::Status JobChief::Flush() {
  if (events_ == nullptr) return absl::OkStatus();
  return events_->Flush();
}

std::string JobChief::summary_dir() const { return summary_dir_; }

}  // namespace worker
}  // namespace lockstep
