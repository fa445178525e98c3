#include "worker/chief/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/crc32c.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "worker/chief/file_util.h"

namespace lockstep::chief {
namespace {

constexpr absl::string_view kPrefix = "ckpt-";
constexpr absl::string_view kSuffix = ".lsckpt";
constexpr absl::string_view kTempPrefix = ".ckpt-";
constexpr absl::string_view kTempMarker = ".tmp.";

void PutLe32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutLe64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t GetLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// A checkpoint file name's parts: "ckpt-<step>[.<job key>].lsckpt".
struct NameParts {
  int64_t step = -1;  // -1: not a checkpoint file name
  std::string job_key;
};

NameParts ParseName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) return {};
  NameParts parts;
  const size_t dot = name.find('.');
  if (dot != absl::string_view::npos) {
    parts.job_key = std::string(name.substr(dot + 1));
    name = name.substr(0, dot);
    if (parts.job_key.empty() || parts.job_key != CheckpointManager::JobKey(parts.job_key)) {
      return {};
    }
  }
  if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) return {};
  if (!absl::SimpleAtoi(name, &parts.step)) return {};
  return parts;
}

// The step in a checkpoint file name, or -1 if `name` is not one.
int64_t StepFromName(absl::string_view name) { return ParseName(name).step; }

// A temporary file name's parts: ".ckpt-<step>[.<job key>].a<attempt>.lsckpt.tmp.XXXXXX".
struct TempParts {
  bool ok = false;
  std::string job_key;
  int attempt = 0;
};

TempParts ParseTempName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kTempPrefix)) return {};
  const size_t marker = name.find(absl::StrCat(kSuffix, kTempMarker));
  if (marker == absl::string_view::npos) return {};
  std::vector<absl::string_view> parts = absl::StrSplit(name.substr(0, marker), '.');
  if (parts.size() < 2 || parts.size() > 3 || !absl::ConsumePrefix(&parts.back(), "a")) return {};
  TempParts out;
  if (!absl::SimpleAtoi(parts.back(), &out.attempt)) return {};
  if (parts.size() == 3) out.job_key = std::string(parts[1]);
  out.ok = true;
  return out;
}

// Names in `dir` for which `keep(name)` holds. NOT_FOUND if `dir` does not exist.
absl::StatusOr<std::vector<std::string>> ListNames(const std::string& dir,
                                                   const std::function<bool(const char*)>& keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return PathError(errno, "list checkpoint directory", dir);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (keep(e->d_name)) names.emplace_back(e->d_name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return PathError(err, "read checkpoint directory", dir);
  return names;
}

// `names` in `dir` as paths, newest step first.
std::vector<std::string> SortedPaths(const std::string& dir, std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return StepFromName(a) > StepFromName(b);
  });
  for (std::string& n : names) n = absl::StrCat(dir, "/", n);
  return names;
}

absl::Status DataLoss(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("corrupt checkpoint: ", what));
}

}  // namespace

std::string CheckpointManager::JobKey(absl::string_view job_uid) {
  std::string key(job_uid);
  for (char& c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '@') {
      c = '_';
    }
  }
  return key;
}

std::string CheckpointManager::FileName(int64_t global_step, absl::string_view job_uid) {
  const std::string key = JobKey(job_uid);
  return absl::StrFormat("%s%010d%s%s%s", kPrefix, global_step, key.empty() ? "" : ".", key,
                         kSuffix);
}

std::string CheckpointManager::TempPrefix(int64_t global_step, absl::string_view job_uid,
                                          int attempt) {
  const std::string key = JobKey(job_uid);
  return absl::StrCat(kTempPrefix, global_step, key.empty() ? "" : ".", key, ".a", attempt,
                      kSuffix, kTempMarker);
}

std::string CheckpointManager::Encode(const lockstep::v1::Checkpoint& checkpoint) {
  std::string out(kHeaderSize, '\0');
  checkpoint.AppendToString(&out);
  absl::string_view payload = absl::string_view(out).substr(kHeaderSize);
  PutLe32(&out[0], kMagic);
  PutLe32(&out[4], kFormatVersion);
  PutLe64(&out[8], payload.size());
  PutLe32(&out[16], MaskCrc32c(Crc32c(payload)));
  PutLe32(&out[20], MaskCrc32c(Crc32c(out.data(), 20)));
  return out;
}

absl::StatusOr<lockstep::v1::Checkpoint> CheckpointManager::Decode(absl::string_view bytes) {
  if (bytes.size() < kHeaderSize) {
    return DataLoss(absl::StrCat("truncated: ", bytes.size(), " bytes, shorter than the ",
                                 kHeaderSize, "-byte header"));
  }
  const char* h = bytes.data();
  if (GetLe32(h) != kMagic) {
    // The file's bytes are not quoted: errors travel to every viewer of the job.
    return DataLoss(absl::StrFormat("wrong magic (want 0x%08x): not a checkpoint file", kMagic));
  }
  if (UnmaskCrc32c(GetLe32(h + 20)) != Crc32c(h, 20)) return DataLoss("header CRC mismatch");
  if (GetLe32(h + 4) != kFormatVersion) {
    return DataLoss(absl::StrCat("format version ", GetLe32(h + 4), " unknown (this build reads ",
                                 kFormatVersion, ")"));
  }
  uint64_t length = GetLe64(h + 8);
  absl::string_view payload = bytes.substr(kHeaderSize);
  if (payload.size() != length) {
    return DataLoss(absl::StrCat(payload.size() < length ? "truncated" : "trailing bytes",
                                 ": payload is ", payload.size(), " bytes, header says ", length));
  }
  if (UnmaskCrc32c(GetLe32(h + 16)) != Crc32c(payload)) return DataLoss("payload CRC mismatch");
  lockstep::v1::Checkpoint checkpoint;
  if (!checkpoint.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return DataLoss("payload is not a lockstep.v1.Checkpoint");
  }
  return checkpoint;
}

absl::StatusOr<lockstep::v1::Checkpoint> CheckpointManager::ReadFile(const std::string& path) {
  LS_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<lockstep::v1::Checkpoint> checkpoint = Decode(bytes);
  if (!checkpoint.ok()) return Annotate(checkpoint.status(), path);
  int64_t named_step = StepFromName(path.substr(path.rfind('/') + 1));
  if (named_step >= 0 && named_step != checkpoint->global_step()) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint: holds step ",
                                            checkpoint->global_step(), ", its name says ",
                                            named_step));
  }
  return checkpoint;
}

absl::StatusOr<std::vector<std::string>> CheckpointManager::List(const std::string& dir) {
  LS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                      ListNames(dir, [](const char* n) { return StepFromName(n) >= 0; }));
  return SortedPaths(dir, std::move(names));
}

absl::StatusOr<std::vector<std::string>> CheckpointManager::ListOfJob(const std::string& dir,
                                                                      absl::string_view job_uid) {
  const std::string key = JobKey(job_uid);
  LS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, [&key](const char* n) {
                        const NameParts parts = ParseName(n);
                        return parts.step >= 0 && parts.job_key == key;
                      }));
  return SortedPaths(dir, std::move(names));
}

absl::StatusOr<CheckpointManager::Restored> CheckpointManager::RestoreLatest(
    const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> paths = List(dir);
  if (absl::IsNotFound(paths.status())) {
    return absl::NotFoundError(absl::StrCat("no checkpoint: directory '", dir, "' does not exist"));
  }
  if (!paths.ok()) return paths.status();
  for (const std::string& path : *paths) {
    absl::StatusOr<lockstep::v1::Checkpoint> checkpoint = ReadFile(path);
    if (checkpoint.ok()) return Restored{*std::move(checkpoint), path};
    // The status names the path and what is wrong with it.
    spdlog::warn("skipping checkpoint: {}", checkpoint.status().ToString());
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in '", dir, "' (", paths->size(),
                                          " checkpoint files skipped as corrupt; see the log)"));
}

absl::StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(Options options) {
  if (options.keep_last < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.keep: must be at least 1, got ", options.keep_last));
  }
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  LS_RETURN_IF_ERROR(CheckWritable(options.dir, options.dir_field));
  // A Save() interrupted before its rename leaves a temporary file: nobody reads it. Only
  // this job's, of this attempt or an earlier one: another job sharing the directory may be
  // writing its own right now.
  const std::string key = JobKey(options.job_uid);
  const int attempt = options.attempt;
  LS_ASSIGN_OR_RETURN(std::vector<std::string> stale,
                      ListNames(options.dir, [&key, attempt](const char* n) {
                        const TempParts parts = ParseTempName(n);
                        return parts.ok && parts.job_key == key && parts.attempt <= attempt;
                      }));
  for (const std::string& name : stale) {
    std::string path = absl::StrCat(options.dir, "/", name);
    spdlog::info("removing {}, left by an interrupted checkpoint write", path);
    ::unlink(path.c_str());
  }
  return std::unique_ptr<CheckpointManager>(new CheckpointManager(std::move(options)));
}

absl::StatusOr<std::string> CheckpointManager::Save(const lockstep::v1::Checkpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  const int64_t step = checkpoint.global_step();
  const std::string context = absl::StrCat("job ", checkpoint.job_id(), " attempt ",
                                           checkpoint.attempt(), ": checkpoint of step ", step);
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat(context, ": negative step"));
  const std::string final_path =
      absl::StrCat(options_.dir, "/", FileName(step, checkpoint.job_uid()));
  std::string temp_path = absl::StrCat(
      options_.dir, "/", TempPrefix(step, checkpoint.job_uid(), checkpoint.attempt()), "XXXXXX");
  int fd = ::mkstemp(temp_path.data());
  if (fd < 0) return Annotate(PathError(errno, "create a file in", options_.dir), context);

  absl::Status status = WriteAll(fd, Encode(checkpoint), temp_path);
  if (status.ok() && ::fsync(fd) != 0) status = PathError(errno, "fsync", temp_path);
  if (::close(fd) != 0 && status.ok()) status = PathError(errno, "close", temp_path);
  if (status.ok() && options_.before_rename_for_test) options_.before_rename_for_test(temp_path);
  if (status.ok() && ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    status = PathError(errno, absl::StrCat("rename '", temp_path, "' to"), final_path);
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());
    return Annotate(status, context);
  }
  LS_RETURN_IF_ERROR(Annotate(FsyncDir(options_.dir), context));
  // The new checkpoint is durable; failing to delete old ones is not worth failing the job.
  absl::Status pruned = Prune(checkpoint.job_uid());
  if (!pruned.ok()) spdlog::warn("{}: pruning old checkpoints: {}", context, pruned.ToString());
  return final_path;
}

absl::Status CheckpointManager::Prune(absl::string_view job_uid) {
  // Only this job's files: another job's checkpoints in the same directory are not ours.
  LS_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListOfJob(options_.dir, job_uid));
  for (size_t i = options_.keep_last; i < paths.size(); ++i) {
    if (::unlink(paths[i].c_str()) != 0 && errno != ENOENT) {
      return PathError(errno, "delete old checkpoint", paths[i]);
    }
  }
  return FsyncDir(options_.dir);
}

}  // namespace lockstep::chief
