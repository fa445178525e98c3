// CheckpointUploader: a worker's side of a client's checkpoint fetch
// (coordinator/checkpoint_fetch.h). The coordinator asks over the assignment stream
// (Assignment.upload_checkpoint); the uploader finds the job's checkpoint on this worker's
// disks and sends it with WorkerService.UploadCheckpoint, a call of the worker's own, so the
// coordinator never dials a worker.
//
// Which file (FindCheckpointToUpload): the job's files (named for its job_uid) in the
// directories a restart looks in (job_restore.h CheckpointDirs: the copy directory under
// --state_dir, the spec's checkpoint.dir), newest step first (or exactly the step asked),
// the first that is at most the directive's max_bytes and reads back whole, checked as it
// streams (checkpoint::CheckpointStreamCheck: nothing is held whole). None: the upload's only
// message says why (NOT_FOUND with every file skipped and its reason), so the coordinator
// asks the next holder at once.
//
// It wraps the worker's AssignmentHandler (the JobRunner): upload directives are taken here,
// everything else is handed on untouched. Each upload runs on a thread of its own, at most
// options.max_uploads at once (more are answered RESOURCE_EXHAUSTED); the file is read and
// sent in chunks of options.chunk_bytes, so an upload holds about two chunks.
//
// Ownership: borrows the wrapped handler; owns its upload threads (joined by the
// destructor, each bounded by options.timeout). Thread model: Handle() from the agent's
// watch thread; the rest forwards to the wrapped handler's thread-safe methods.
#ifndef LOCKSTEP_WORKER_CHECKPOINT_UPLOAD_H_
#define LOCKSTEP_WORKER_CHECKPOINT_UPLOAD_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lockstep/v1/coordinator.pb.h"
#include "worker/assignment_handler.h"
#include "worker/file_roots.h"

namespace lockstep {
namespace worker {

// One open UploadCheckpoint call (the gRPC one is grpc_checkpoint_upload.h).
class UploadStream {
 public:
  virtual ~UploadStream() = default;
  // False when the call broke (Finish() says why).
  virtual bool Write(const v1::CheckpointUploadChunk& message) = 0;
  // Closes the sending side and returns the coordinator's answer.
  virtual absl::Status Finish() = 0;
};

// Opens an UploadCheckpoint call that ends by `deadline`.
using UploadOpener = std::function<std::unique_ptr<UploadStream>(absl::Time deadline)>;

// A file chosen to send.
struct CheckpointFile {
  std::string path;
  int64_t step = 0;
  int64_t bytes = 0;
};

// The file of `job_uid` to send from `dirs` (see above): `step` 0 for the newest.
// NOT_FOUND naming the job, the directories and every file skipped (with why).
absl::StatusOr<CheckpointFile> FindCheckpointToUpload(const std::vector<std::string>& dirs,
                                                      const std::string& job_uid, int64_t step,
                                                      int64_t max_bytes);

struct CheckpointUploaderOptions {
  std::string state_dir;  // lockstepd --state_dir
  // The worker's --output_root (file_roots.h): the directive's checkpoint_dir is resolved
  // under it as the job's was (a relative one, as jobs give it), and one outside it is not
  // read. Null: taken as it is (tests).
  std::shared_ptr<const FileRoots> file_roots;
  size_t chunk_bytes = 1 << 20;  // under the coordinator's gRPC message limit (4 MiB)
  int max_uploads = 2;
  absl::Duration timeout = absl::Minutes(10);  // one upload, start to end
};

class CheckpointUploader final : public AssignmentHandler {
 public:
  CheckpointUploader(AssignmentHandler* jobs, UploadOpener open, CheckpointUploaderOptions options)
      : jobs_(jobs), open_(std::move(open)), options_(std::move(options)) {}
  ~CheckpointUploader() override;

  void Handle(const v1::Assignment& assignment) override;
  void DropAll(const std::string& reason) override { jobs_->DropAll(reason); }
  std::vector<v1::JobReport> Reports() override { return jobs_->Reports(); }
  void ReportsDelivered() override { jobs_->ReportsDelivered(); }
  std::vector<v1::JobDiagnostics> Diagnostics() override { return jobs_->Diagnostics(); }

  // One directive, on the calling thread: finds the file and sends it (or why there is
  // none). Returns the call's outcome (the coordinator's answer, or why the call broke).
  absl::Status Upload(const v1::UploadCheckpoint& directive);

 private:
  // Sends `file` after `first` (its description) in chunks.
  absl::Status Send(UploadStream& stream, v1::CheckpointUploadChunk first,
                    const CheckpointFile& file);

  AssignmentHandler* const jobs_;
  const UploadOpener open_;
  const CheckpointUploaderOptions options_;

  // An upload's thread; `done` once it returned (the next Handle() joins it).
  struct Running {
    std::thread thread;
    bool done = false;
  };

  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Running> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_CHECKPOINT_UPLOAD_H_
