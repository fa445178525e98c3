#include "checkpoint/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep::checkpoint {
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
  return absl::StrCat(kTempPrefix, global_step, key.empty() ? "" : ".", key, ".a", attempt, kSuffix,
                      kTempMarker);
}

namespace {

// The tensors of `checkpoint` in file order: variables, then optimizer slots.
std::vector<const lockstep::v1::NamedTensor*> TensorsOf(const lockstep::v1::Checkpoint& c) {
  std::vector<const lockstep::v1::NamedTensor*> out;
  for (const auto& named : c.variables()) out.push_back(&named);
  for (const auto& named : c.optimizer_slots()) out.push_back(&named);
  return out;
}
std::vector<lockstep::v1::NamedTensor*> MutableTensorsOf(lockstep::v1::Checkpoint& c) {
  std::vector<lockstep::v1::NamedTensor*> out;
  for (auto& named : *c.mutable_variables()) out.push_back(&named);
  for (auto& named : *c.mutable_optimizer_slots()) out.push_back(&named);
  return out;
}

// `checkpoint` without its tensors' contents: what version 2 stores as a message.
lockstep::v1::Checkpoint MetadataOf(const lockstep::v1::Checkpoint& checkpoint) {
  lockstep::v1::Checkpoint meta;
  meta.set_job_id(checkpoint.job_id());
  meta.set_attempt(checkpoint.attempt());
  meta.set_global_step(checkpoint.global_step());
  if (checkpoint.has_data_position()) *meta.mutable_data_position() = checkpoint.data_position();
  meta.set_created_unix_micros(checkpoint.created_unix_micros());
  meta.set_job_uid(checkpoint.job_uid());
  // Every field but the content, present where it was.
  auto copy = [](const lockstep::v1::NamedTensor& from, lockstep::v1::NamedTensor* to) {
    to->set_name(from.name());
    if (!from.has_tensor()) return;
    to->mutable_tensor()->set_dtype(from.tensor().dtype());
    if (from.tensor().has_shape()) *to->mutable_tensor()->mutable_shape() = from.tensor().shape();
  };
  for (const auto& v : checkpoint.variables()) copy(v, meta.add_variables());
  for (const auto& v : checkpoint.optimizer_slots()) copy(v, meta.add_optimizer_slots());
  return meta;
}

// Writes the version 2 payload of `checkpoint` to `sink` in pieces (the contents straight
// from the tensors: nothing is copied whole).
absl::Status EncodePayload(const lockstep::v1::Checkpoint& checkpoint, size_t max_message_bytes,
                           const std::function<absl::Status(absl::string_view)>& sink) {
  const lockstep::v1::Checkpoint meta = MetadataOf(checkpoint);
  const size_t meta_bytes = meta.ByteSizeLong();
  std::string head;
  if (meta_bytes > max_message_bytes || !meta.SerializeToString(&head)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job ", checkpoint.job_id(), ": checkpoint of step ", checkpoint.global_step(),
        ": its metadata (names, shapes, data position) is ", meta_bytes, " bytes, over the ",
        max_message_bytes, " bytes one protobuf message may hold"));
  }
  std::string lengths(8, '\0');
  PutLe64(&lengths[0], head.size());
  head.insert(0, lengths);
  const std::vector<const lockstep::v1::NamedTensor*> tensors = TensorsOf(checkpoint);
  std::string table(8 * (tensors.size() + 1), '\0');
  PutLe64(&table[0], tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    PutLe64(&table[8 * (i + 1)], tensors[i]->tensor().content().size());
  }
  LS_RETURN_IF_ERROR(sink(head));
  LS_RETURN_IF_ERROR(sink(table));
  for (const lockstep::v1::NamedTensor* t : tensors) {
    LS_RETURN_IF_ERROR(sink(t->tensor().content()));
  }
  return absl::OkStatus();
}

// The header for a payload of `length` bytes with CRC `crc` (unmasked).
std::string Header(uint64_t length, uint32_t crc) {
  std::string header(CheckpointManager::kHeaderSize, '\0');
  PutLe32(&header[0], CheckpointManager::kMagic);
  PutLe32(&header[4], CheckpointManager::kFormatVersion);
  PutLe64(&header[8], length);
  PutLe32(&header[16], MaskCrc32c(crc));
  PutLe32(&header[20], MaskCrc32c(Crc32c(header.data(), 20)));
  return header;
}

// Reads the payload's next `n` bytes into `dst` (the caller has checked that they exist).
using PayloadReader = std::function<absl::Status(char* dst, uint64_t n)>;

// A version 2 payload of `size` bytes, from `read`. Every length is checked against what is
// left before anything is allocated for it; the contents are read straight into the tensors.
absl::StatusOr<lockstep::v1::Checkpoint> DecodePayloadV2(uint64_t size, size_t max_message_bytes,
                                                         const PayloadReader& read) {
  uint64_t left = size;
  auto take = [&](char* dst, uint64_t n) {
    left -= n;
    return read(dst, n);
  };
  char word[8];
  if (left < 8) return DataLoss("truncated: no metadata length");
  LS_RETURN_IF_ERROR(take(word, 8));
  const uint64_t meta_bytes = GetLe64(word);
  if (meta_bytes > max_message_bytes) {
    return DataLoss(absl::StrCat("metadata of ", meta_bytes, " bytes, over the ", max_message_bytes,
                                 " bytes one protobuf message may hold"));
  }
  if (meta_bytes > left) {
    return DataLoss(absl::StrCat("truncated: metadata of ", meta_bytes, " bytes, ", left, " left"));
  }
  std::string meta(meta_bytes, '\0');
  LS_RETURN_IF_ERROR(take(meta.data(), meta_bytes));
  lockstep::v1::Checkpoint checkpoint;
  if (!checkpoint.ParseFromArray(meta.data(), static_cast<int>(meta_bytes))) {
    return DataLoss("metadata is not a lockstep.v1.Checkpoint");
  }
  std::vector<lockstep::v1::NamedTensor*> tensors = MutableTensorsOf(checkpoint);
  if (left < 8) return DataLoss("truncated: no tensor table");
  LS_RETURN_IF_ERROR(take(word, 8));
  if (GetLe64(word) != tensors.size()) {
    return DataLoss(
        absl::StrCat("the tensor table does not list the metadata's ", tensors.size(), " tensors"));
  }
  if (left / 8 < tensors.size()) return DataLoss("truncated: tensor table");
  std::string table(8 * tensors.size(), '\0');
  LS_RETURN_IF_ERROR(take(table.data(), table.size()));
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t length = GetLe64(table.data() + 8 * i);
    if (length > left - total) {
      return DataLoss(absl::StrCat("tensor ", i, " of ", length, " bytes runs past the ", left,
                                   " bytes of contents"));
    }
    if (length > 0 && !tensors[i]->has_tensor()) {
      return DataLoss(absl::StrCat("tensor ", i, " has content but no tensor in the metadata"));
    }
    total += length;
  }
  if (total != left) {
    return DataLoss(absl::StrCat("trailing bytes: the tensors hold ", total, " of the ", left,
                                 " bytes of contents"));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t length = GetLe64(table.data() + 8 * i);
    if (length == 0) continue;
    std::string* content = tensors[i]->mutable_tensor()->mutable_content();
    content->resize(length);
    LS_RETURN_IF_ERROR(take(content->data(), length));
  }
  return checkpoint;
}

// The header's checks: magic, its CRC, a known version and the payload length against the
// `payload_bytes` there are. Returns the version.
absl::StatusOr<uint32_t> CheckHeader(const char* h, uint64_t payload_bytes) {
  if (GetLe32(h) != CheckpointManager::kMagic) {
    // The file's bytes are not quoted: errors travel to every viewer of the job.
    return DataLoss(absl::StrFormat("wrong magic (want 0x%08x): not a checkpoint file",
                                    CheckpointManager::kMagic));
  }
  if (UnmaskCrc32c(GetLe32(h + 20)) != Crc32c(h, 20)) return DataLoss("header CRC mismatch");
  const uint32_t version = GetLe32(h + 4);
  if (version != CheckpointManager::kFormatVersion &&
      version != CheckpointManager::kProtoPayloadVersion) {
    return DataLoss(absl::StrCat("format version ", version, " unknown (this build reads ",
                                 CheckpointManager::kProtoPayloadVersion, " and ",
                                 CheckpointManager::kFormatVersion, ")"));
  }
  const uint64_t length = GetLe64(h + 8);
  if (payload_bytes != length) {
    return DataLoss(absl::StrCat(payload_bytes < length ? "truncated" : "trailing bytes",
                                 ": payload is ", payload_bytes, " bytes, header says ", length));
  }
  return version;
}

absl::StatusOr<lockstep::v1::Checkpoint> DecodeProtoPayload(absl::string_view payload,
                                                            size_t max_message_bytes) {
  lockstep::v1::Checkpoint checkpoint;
  if (payload.size() > max_message_bytes ||
      !checkpoint.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return DataLoss("payload is not a lockstep.v1.Checkpoint");
  }
  return checkpoint;
}

}  // namespace

absl::StatusOr<std::string> CheckpointManager::Encode(const lockstep::v1::Checkpoint& checkpoint,
                                                      size_t max_message_bytes) {
  std::string out(kHeaderSize, '\0');
  uint32_t crc = 0;
  LS_RETURN_IF_ERROR(EncodePayload(checkpoint, max_message_bytes, [&](absl::string_view piece) {
    crc = Crc32cExtend(crc, piece.data(), piece.size());
    out.append(piece.data(), piece.size());
    return absl::OkStatus();
  }));
  const std::string header = Header(out.size() - kHeaderSize, crc);
  out.replace(0, kHeaderSize, header);
  return out;
}

absl::StatusOr<uint32_t> CheckpointManager::CheckHeader(const char* header,
                                                        uint64_t payload_bytes) {
  return checkpoint::CheckHeader(header, payload_bytes);
}

uint32_t CheckpointManager::PayloadCrc(const char* header) {
  return UnmaskCrc32c(GetLe32(header + 16));
}

absl::StatusOr<lockstep::v1::Checkpoint> CheckpointManager::Decode(absl::string_view bytes,
                                                                   size_t max_message_bytes) {
  if (bytes.size() < kHeaderSize) {
    return DataLoss(absl::StrCat("truncated: ", bytes.size(), " bytes, shorter than the ",
                                 kHeaderSize, "-byte header"));
  }
  const char* h = bytes.data();
  LS_ASSIGN_OR_RETURN(const uint32_t version, CheckHeader(h, bytes.size() - kHeaderSize));
  absl::string_view payload = bytes.substr(kHeaderSize);
  if (UnmaskCrc32c(GetLe32(h + 16)) != Crc32c(payload)) return DataLoss("payload CRC mismatch");
  if (version == kProtoPayloadVersion) return DecodeProtoPayload(payload, max_message_bytes);
  return DecodePayloadV2(payload.size(), max_message_bytes, [&payload](char* dst, uint64_t n) {
    std::memcpy(dst, payload.data(), n);
    payload.remove_prefix(n);
    return absl::OkStatus();
  });
}

namespace {

// Decodes the checkpoint file open as `fd` (`size` bytes), reading the contents straight
// into the tensors: no copy of the whole file is held beside them.
absl::StatusOr<lockstep::v1::Checkpoint> ReadOpenFile(int fd, uint64_t size,
                                                      const std::string& path,
                                                      size_t max_message_bytes) {
  using CM = CheckpointManager;
  if (size < CM::kHeaderSize) {
    return DataLoss(absl::StrCat("truncated: ", size, " bytes, shorter than the ", CM::kHeaderSize,
                                 "-byte header"));
  }
  uint32_t crc = 0;
  auto read = [&](char* dst, uint64_t n, bool sum) {
    while (n > 0) {
      const ssize_t got = ::read(fd, dst, std::min<uint64_t>(n, 1 << 30));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return PathError(errno, "read", path);
      if (got == 0) return DataLoss("truncated while reading");  // the file shrank
      if (sum) crc = Crc32cExtend(crc, dst, static_cast<size_t>(got));
      dst += got;
      n -= static_cast<uint64_t>(got);
    }
    return absl::OkStatus();
  };
  char h[CM::kHeaderSize];
  LS_RETURN_IF_ERROR(read(h, sizeof(h), false));
  const uint64_t payload_bytes = size - CM::kHeaderSize;
  LS_ASSIGN_OR_RETURN(const uint32_t version, CheckHeader(h, payload_bytes));
  if (version == CM::kProtoPayloadVersion) {
    // One message, under 2 GiB by construction.
    if (payload_bytes > max_message_bytes)
      return DataLoss("payload is not a lockstep.v1.Checkpoint");
    std::string payload(payload_bytes, '\0');
    LS_RETURN_IF_ERROR(read(payload.data(), payload_bytes, true));
    if (UnmaskCrc32c(GetLe32(h + 16)) != crc) return DataLoss("payload CRC mismatch");
    return DecodeProtoPayload(payload, max_message_bytes);
  }
  uint64_t consumed = 0;
  absl::StatusOr<lockstep::v1::Checkpoint> checkpoint =
      DecodePayloadV2(payload_bytes, max_message_bytes, [&](char* dst, uint64_t n) {
        consumed += n;
        return read(dst, n, true);
      });
  // The CRC decides first: a flipped bit is reported as such, wherever it landed. What a
  // failed decode left unread is summed in pieces.
  std::string rest;
  while (consumed < payload_bytes) {
    rest.resize(std::min<uint64_t>(payload_bytes - consumed, 1 << 20));
    LS_RETURN_IF_ERROR(read(rest.data(), rest.size(), true));
    consumed += rest.size();
  }
  if (UnmaskCrc32c(GetLe32(h + 16)) != crc) return DataLoss("payload CRC mismatch");
  return checkpoint;
}

}  // namespace

absl::StatusOr<lockstep::v1::Checkpoint> CheckpointManager::ReadFile(const std::string& path,
                                                                     size_t max_message_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PathError(errno, "open", path);
  struct stat st;
  absl::StatusOr<lockstep::v1::Checkpoint> checkpoint =
      ::fstat(fd, &st) != 0
          ? PathError(errno, "stat", path)
          : ReadOpenFile(fd, static_cast<uint64_t>(st.st_size), path, max_message_bytes);
  ::close(fd);
  // The file system's errors name the path already; what is wrong inside the file does not.
  if (absl::IsDataLoss(checkpoint.status())) return Annotate(checkpoint.status(), path);
  if (!checkpoint.ok()) return checkpoint.status();
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

  // The payload straight from the tensors (no copy of the whole file in memory), then the
  // header, which needs its length and CRC, over the space left for it.
  uint32_t crc = 0;
  uint64_t length = 0;
  absl::Status status = WriteAll(fd, std::string(kHeaderSize, '\0'), temp_path);
  if (status.ok()) {
    status = EncodePayload(checkpoint, options_.max_message_bytes_for_test,
                           [&](absl::string_view piece) {
                             crc = Crc32cExtend(crc, piece.data(), piece.size());
                             length += piece.size();
                             return WriteAll(fd, piece, temp_path);
                           });
  }
  if (status.ok()) {
    const std::string header = Header(length, crc);
    if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
      status = PathError(errno, "write the header of", temp_path);
    }
  }
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

}  // namespace lockstep::checkpoint
