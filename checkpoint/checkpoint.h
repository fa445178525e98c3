// Chief checkpoints: durable, atomically published, CRC-checked, the last K kept.
//
// File name: ckpt-<global_step, 10 digits>.<job key>.lsckpt, the job key being the
// checkpoint's job_uid with every character but letters, digits, '-', '_' and '@' made '_'
// (ckpt-<step>.lsckpt for a checkpoint with no job_uid). So jobs that share a directory
// never overwrite each other's files, and pruning deletes only the saving job's own.
//
// File format (all integers little-endian):
//   offset  0  uint32  magic 0x4B43534C ("LSCK" on disk)
//           4  uint32  format version (2; version 1 files are still read)
//           8  uint64  payload length in bytes
//          16  uint32  masked CRC32C of the payload
//          20  uint32  masked CRC32C of header bytes [0, 20) (a flipped length is caught
//                      before anything is allocated)
//          24  payload
// The file must be exactly 24 + payload length bytes.
// Payload, version 2: uint64 M, then M bytes of a serialized lockstep.v1.Checkpoint whose
// tensors have no content (the metadata), then uint64 N (the tensors: its variables, then its
// optimizer slots), N uint64 content lengths, and the N contents in that order. Only the
// metadata is a protobuf message, so a checkpoint is not bound by protobuf's 2 GiB limit on
// one message: any model up to the coordinator's --max_model_bytes (16 GiB) round-trips.
// Version 1 (read only): the payload is one serialized lockstep.v1.Checkpoint (< 2 GiB).
//
// Save(): write to a temporary file in the same directory, named for the step, the job and
// the attempt (".ckpt-<step>.<job key>.a<attempt>.lsckpt.tmp.XXXXXX", never matched as a
// checkpoint), fsync it, rename it into place, fsync the directory, then delete all but the
// newest keep_last checkpoints of the same job (ListOfJob). A crash at any point leaves
// either the previous set of checkpoints or the new one, never a visible partial file.
// Create() removes the temporary files a crashed Save() of the same job left, from its own
// attempt or an earlier one (the coordinator starts an attempt only once every worker left
// the one before): another job's files, in flight or not, are never touched.
//
// RestoreLatest(): lists the directory newest step first and returns the first file that
// reads back whole (magic, version, length, both CRCs, proto parse, step matching the name);
// every file skipped is logged (spdlog warning) with its path and the reason.
//
// Ownership and threads: a CheckpointManager owns nothing but its options; Save() is
// serialized by a mutex (one chief writes). The static functions are safe from any thread.
#ifndef LOCKSTEP_CHECKPOINT_CHECKPOINT_H_
#define LOCKSTEP_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep::checkpoint {

class CheckpointManager {
 public:
  static constexpr uint32_t kMagic = 0x4B43534Cu;
  static constexpr uint32_t kFormatVersion = 2;        // written
  static constexpr uint32_t kProtoPayloadVersion = 1;  // read only
  static constexpr size_t kHeaderSize = 24;
  // The largest serialized protobuf message (protobuf refuses to write or read more).
  static constexpr size_t kMaxMessageBytes = 0x7fffffff;

  struct Options {
    std::string dir;    // created if missing; must be writable
    int keep_last = 5;  // >= 1: newest checkpoints kept after each Save()
    // What errors about `dir` name: the job spec field, or the flag a worker's own copies
    // live under.
    std::string dir_field = "checkpoint.dir";
    // The job (Partition.job_uid) and attempt whose checkpoints this manager writes: whose
    // leftover temporary files Create() may remove.
    std::string job_uid;
    int attempt = 0;
    // Tests only: called after the temporary file is written and fsynced, before the
    // rename (a test _exit()s here to simulate a crash). Leave empty otherwise.
    std::function<void(const std::string& temp_path)> before_rename_for_test;
    // Tests only: the largest protobuf message written or read (protobuf's own limit, 2 GiB,
    // by default); a test lowers it to show that contents of any size pass beside it.
    size_t max_message_bytes_for_test = kMaxMessageBytes;
  };

  // A checkpoint read back, and the file it came from.
  struct Restored {
    lockstep::v1::Checkpoint checkpoint;
    std::string path;
  };

  // Checks the directory (CheckWritable, field "checkpoint.dir") and keep_last ("checkpoint.
  // keep"); removes the temporary files a crashed Save() of the same job left (its attempt or
  // an earlier one). INVALID_ARGUMENT naming the field.
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(Options options);

  // Durably writes `checkpoint` as FileName(global_step, job_uid) and prunes the job's old
  // ones (never another job's); returns the new file's path. A checkpoint of the same job
  // and step replaces the old one atomically.
  // Errors (from the file system) name the job, attempt, step and path.
  absl::StatusOr<std::string> Save(const lockstep::v1::Checkpoint& checkpoint)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& dir() const { return options_.dir; }

  // The newest valid checkpoint in `dir`. NOT_FOUND if the directory holds none (or does not
  // exist); the message counts the files skipped.
  static absl::StatusOr<Restored> RestoreLatest(const std::string& dir);

  // Paths of files named like checkpoints in `dir`, newest step first (not validated).
  static absl::StatusOr<std::vector<std::string>> List(const std::string& dir);
  // The same, only the files named for the job `job_uid` (JobKey).
  static absl::StatusOr<std::vector<std::string>> ListOfJob(const std::string& dir,
                                                            absl::string_view job_uid);

  // Reads and validates one checkpoint file, its contents straight into the tensors (no copy
  // of the whole file beside them). DATA_LOSS naming the path and what is wrong (truncated,
  // bad magic, unknown version, header or payload CRC mismatch, parse failure).
  static absl::StatusOr<lockstep::v1::Checkpoint> ReadFile(
      const std::string& path, size_t max_message_bytes = kMaxMessageBytes);

  // The file bytes for `checkpoint` (header + payload), and their inverse. Encode fails
  // (RESOURCE_EXHAUSTED naming the size) only when the metadata alone is over
  // `max_message_bytes`; Decode answers DATA_LOSS as ReadFile does.
  static absl::StatusOr<std::string> Encode(const lockstep::v1::Checkpoint& checkpoint,
                                            size_t max_message_bytes = kMaxMessageBytes);
  static absl::StatusOr<lockstep::v1::Checkpoint> Decode(
      absl::string_view bytes, size_t max_message_bytes = kMaxMessageBytes);

  // The checks of a file's kHeaderSize-byte header against the `payload_bytes` that follow
  // it: magic, header CRC, a known version, the length. Returns the version; DATA_LOSS as
  // ReadFile (checkpoint_stream.h checks a file that arrives in pieces with it).
  static absl::StatusOr<uint32_t> CheckHeader(const char* header, uint64_t payload_bytes);
  // The payload CRC32C the header records (unmasked).
  static uint32_t PayloadCrc(const char* header);

  // "ckpt-0000000042.job-000007@1732000000000000.lsckpt"; "ckpt-0000000042.lsckpt" for an
  // empty job_uid.
  static std::string FileName(int64_t global_step, absl::string_view job_uid = "");
  // `job_uid` as it appears in file names.
  static std::string JobKey(absl::string_view job_uid);
  // The prefix of Save()'s temporary files for a checkpoint of `global_step` of `job_uid`'s
  // `attempt`: ".ckpt-42.job-000007@1732000000000000.a3.lsckpt.tmp." (mkstemp adds six
  // characters).
  static std::string TempPrefix(int64_t global_step, absl::string_view job_uid, int attempt);

 private:
  explicit CheckpointManager(Options options) : options_(std::move(options)) {}
  // Deletes all but the newest keep_last checkpoints of `job_uid`.
  absl::Status Prune(absl::string_view job_uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
};

}  // namespace lockstep::checkpoint

#endif  // LOCKSTEP_CHECKPOINT_CHECKPOINT_H_
