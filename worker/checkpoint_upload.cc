#include "worker/checkpoint_upload.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_stream.h"
#include "spdlog/spdlog.h"
#include "worker/job_restore.h"

namespace lockstep {
namespace worker {
namespace {

constexpr size_t kCheckChunk = 1 << 20;

// The step in a checkpoint file's name ("ckpt-0000000042.<job key>.lsckpt"); -1 if none.
int64_t StepOfName(const std::string& path) {
  const std::string base = path.substr(path.rfind('/') + 1);
  if (!absl::StartsWith(base, "ckpt-")) return -1;
  const size_t dot = base.find('.', 5);
  int64_t step = -1;
  if (!absl::SimpleAtoi(base.substr(5, dot - 5), &step)) return -1;
  return step;
}

// Reads `path` through a CheckpointStreamCheck: OK when it is a whole checkpoint of
// `job_uid` at `step`.
absl::Status CheckFile(const std::string& path, int64_t bytes, const std::string& job_uid,
                       int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot be opened");
  checkpoint::CheckpointStreamCheck check(static_cast<uint64_t>(bytes));
  std::string buffer(kCheckChunk, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (absl::Status s = check.Feed(absl::string_view(buffer.data(), in.gcount())); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = check.Finish(); !s.ok()) return s;
  if (check.metadata().has_value() &&
      (check.metadata()->job_uid() != job_uid || check.metadata()->global_step() != step)) {
    return absl::DataLossError(absl::StrCat("holds step ", check.metadata()->global_step(),
                                            " of \"", check.metadata()->job_uid(), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointFile> FindCheckpointToUpload(const std::vector<std::string>& dirs,
                                                      const std::string& job_uid, int64_t step,
                                                      int64_t max_bytes) {
  std::vector<CheckpointFile> candidates;
  std::vector<std::string> skipped;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::vector<std::string>> files =
        checkpoint::CheckpointManager::ListOfJob(dir, job_uid);
    if (!files.ok()) continue;  // a directory this worker does not have
    for (const std::string& path : *files) {
      const int64_t at = StepOfName(path);
      if (at < 0 || (step != 0 && at != step)) continue;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;
      candidates.push_back({path, at, static_cast<int64_t>(st.st_size)});
    }
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const CheckpointFile& a, const CheckpointFile& b) { return a.step > b.step; });
  for (const CheckpointFile& file : candidates) {
    if (file.bytes > max_bytes) {
      skipped.push_back(
          absl::StrCat(file.path, ": ", file.bytes, " bytes, over the job's bound of ", max_bytes));
      continue;
    }
    if (absl::Status s = CheckFile(file.path, file.bytes, job_uid, file.step); !s.ok()) {
      spdlog::warn("checkpoint {} is not sent: {}", file.path, std::string(s.message()));
      skipped.push_back(absl::StrCat(file.path, ": ", s.message()));
      continue;
    }
    return file;
  }
  return absl::NotFoundError(absl::StrCat(
      "no ", step == 0 ? "checkpoint" : absl::StrCat("checkpoint of step ", step), " of ", job_uid,
      " in ", dirs.empty() ? "no directory" : absl::StrJoin(dirs, ", "),
      skipped.empty() ? "" : absl::StrCat(" (skipped: ", absl::StrJoin(skipped, "; "), ")")));
}

CheckpointUploader::~CheckpointUploader() {
  std::list<Running> threads;
  {
    absl::MutexLock l(&mu_);
    threads.swap(threads_);
  }
  for (Running& r : threads) r.thread.join();
}

void CheckpointUploader::Handle(const v1::Assignment& assignment) {
  if (!assignment.has_upload_checkpoint()) {
    jobs_->Handle(assignment);
    return;
  }
  const v1::UploadCheckpoint directive = assignment.upload_checkpoint();
  absl::MutexLock l(&mu_);
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();  // returned already: at once
    it = threads_.erase(it);
  }
  if (running_ >= options_.max_uploads) {
    // Answered at once, so the coordinator asks another holder instead of waiting.
    threads_.emplace_back();
    Running* r = &threads_.back();
    r->thread = std::thread([this, directive, r] {
      v1::CheckpointUploadChunk busy;
      busy.set_fetch_id(directive.fetch_id());
      *busy.mutable_task() = directive.task();
      busy.set_error_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
      busy.set_error_message(
          absl::StrCat(options_.max_uploads, " checkpoint uploads run on this worker already"));
      if (std::unique_ptr<UploadStream> s = open_(absl::Now() + absl::Seconds(10)); s != nullptr) {
        s->Write(busy);
        s->Finish().IgnoreError();
      }
      absl::MutexLock l(&mu_);
      r->done = true;
    });
    return;
  }
  ++running_;
  threads_.emplace_back();
  Running* r = &threads_.back();
  r->thread = std::thread([this, directive, r] {
    absl::Status s = Upload(directive);
    if (!s.ok()) {
      spdlog::warn("job {}: uploading a checkpoint to the coordinator: {}", directive.job_id(),
                   s.ToString());
    }
    absl::MutexLock l(&mu_);
    --running_;
    r->done = true;
  });
}

absl::Status CheckpointUploader::Upload(const v1::UploadCheckpoint& directive) {
  v1::Partition partition;  // what CheckpointDirs reads
  partition.set_job_id(directive.job_id());
  partition.set_job_uid(directive.job_uid());
  if (!directive.checkpoint_dir().empty()) {
    std::string dir = directive.checkpoint_dir();
    if (options_.file_roots != nullptr) {
      absl::StatusOr<std::string> resolved =
          options_.file_roots->ResolveOutput(dir, "checkpoint.dir");
      if (!resolved.ok()) {
        spdlog::warn("job {}: not reading checkpoints from {}: {}", directive.job_id(), dir,
                     std::string(resolved.status().message()));
      }
      dir = resolved.ok() ? *resolved : "";
    }
    partition.mutable_spec()->mutable_checkpoint()->set_dir(dir);
  }
  absl::StatusOr<CheckpointFile> file =
      FindCheckpointToUpload(CheckpointDirs(options_.state_dir, partition), directive.job_uid(),
                             directive.step(), directive.max_bytes());
  v1::CheckpointUploadChunk first;
  first.set_fetch_id(directive.fetch_id());
  *first.mutable_task() = directive.task();
  std::unique_ptr<UploadStream> stream = open_(absl::Now() + options_.timeout);
  if (stream == nullptr) return absl::UnavailableError("cannot open UploadCheckpoint");
  if (!file.ok()) {
    first.set_error_code(static_cast<int>(file.status().code()));
    first.set_error_message(std::string(file.status().message()));
    stream->Write(first);
    return stream->Finish();
  }
  spdlog::info("job {}: sending checkpoint {} (step {}, {} bytes) to the coordinator",
               directive.job_id(), file->path, file->step, file->bytes);
  first.set_step(file->step);
  first.set_total_bytes(file->bytes);
  first.set_file(file->path);
  return Send(*stream, std::move(first), *file);
}

absl::Status CheckpointUploader::Send(UploadStream& stream, v1::CheckpointUploadChunk first,
                                      const CheckpointFile& file) {
  if (!stream.Write(first)) return stream.Finish();
  std::ifstream in(file.path, std::ios::binary);
  if (!in) {
    // Gone since it was checked: the coordinator sees a stream without its last chunk.
    stream.Finish().IgnoreError();
    return absl::NotFoundError(absl::StrCat(file.path, " cannot be opened"));
  }
  int64_t sent = 0;
  v1::CheckpointUploadChunk chunk;
  std::string* data = chunk.mutable_data();
  while (sent < file.bytes) {
    const size_t n = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(options_.chunk_bytes), file.bytes - sent));
    data->resize(n);
    in.read(data->data(), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n) {
      stream.Finish().IgnoreError();
      return absl::DataLossError(absl::StrCat(file.path, " ended after ", sent + in.gcount(),
                                              " of ", file.bytes, " bytes"));
    }
    sent += static_cast<int64_t>(n);
    chunk.set_last(sent == file.bytes);
    if (!stream.Write(chunk)) break;
  }
  return stream.Finish();
}

}  // namespace worker
}  // namespace lockstep
