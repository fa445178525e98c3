// Writes TensorBoard event files: events.out.tfevents.<unix seconds>.<hostname>[suffix] in
// a summaries directory, TFRecord-framed (common/tfrecord.h) lockstep.v1.Event
// messages (TensorFlow's field numbers, proto/lockstep/v1/event.proto). The first record is
// Event{file_version: "brain.Event:2"}; then one Event per AddScalar(s) call, holding a
// Summary of simple_value scalars (loss, accuracy, learning rate, examples/s, busbw).
//
// Each event is handed to the kernel (fflush) as soon as it is added, whole, so TensorBoard
// reading the file while the job trains sees every event added so far and never half of
// one (events come every N steps, so this costs a write(2) per summary). Flush() fsyncs, so
// what was added before it survives a machine crash. The destructor flushes and closes.
//
// Ownership and threads: the writer owns its file. Every method is thread-safe (one mutex);
// the chief's training loop and a reporting thread may both add scalars.
#ifndef LOCKSTEP_WORKER_CHIEF_EVENT_WRITER_H_
#define LOCKSTEP_WORKER_CHIEF_EVENT_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "lockstep/v1/event.pb.h"

namespace lockstep::chief {

// The scalar tags the chief writes, so the training loop, tests and docs agree.
namespace summary_tags {
inline constexpr absl::string_view kLoss = "loss";
inline constexpr absl::string_view kTrainAccuracy = "accuracy/train";
inline constexpr absl::string_view kEvalAccuracy = "accuracy/eval";
inline constexpr absl::string_view kEvalLoss = "loss/eval";
inline constexpr absl::string_view kLearningRate = "learning_rate";
inline constexpr absl::string_view kExamplesPerSec = "examples_per_sec";
inline constexpr absl::string_view kBusBandwidth = "allreduce/busbw_gbps";
// Milliseconds per step (distribute::StepTimes), averaged over the summary window.
inline constexpr absl::string_view kStepMs = "step/time_ms";
inline constexpr absl::string_view kComputeMs = "step/compute_ms";
inline constexpr absl::string_view kAllReduceWaitMs = "step/allreduce_wait_ms";
inline constexpr absl::string_view kApplyMs = "step/apply_ms";
// A GPU job: the largest peak of this worker's GPUs' device memory so far, in MiB.
inline constexpr absl::string_view kGpuPeakMib = "memory/gpu_peak_mib";
}  // namespace summary_tags

class EventWriter {
 public:
  struct Options {
    std::string dir;       // created if missing; must be writable
    std::string hostname;  // empty: gethostname()
    // Appended to the file name, as TensorFlow's filename_suffix (e.g. ".job-000003"), so
    // several writers started in the same second in one directory do not collide.
    std::string filename_suffix;
    Clock* clock = nullptr;  // wall_time of events and the name's seconds; null: real clock
  };

  static constexpr absl::string_view kFileVersion = "brain.Event:2";

  // Creates the directory if needed (INVALID_ARGUMENT naming "summaries.dir" if it cannot be
  // written), creates the file (ALREADY_EXISTS if that name is taken) and writes the
  // file_version record.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(Options options);
  ~EventWriter();

  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event at `step` with one scalar.
  absl::Status AddScalar(absl::string_view tag, int64_t step, float value) ABSL_LOCKS_EXCLUDED(mu_);
  // One Event at `step` with several scalars (tag, value).
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Any Event (wall_time is filled in when zero).
  absl::Status WriteEvent(lockstep::v1::Event event) ABSL_LOCKS_EXCLUDED(mu_);

  // fflush + fsync: everything added so far is on disk when this returns OK.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }

 private:
  EventWriter(std::string path, std::FILE* file, Clock* clock)
      : path_(std::move(path)), clock_(clock), file_(file) {}

  const std::string path_;
  Clock* const clock_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  // The first write error; later calls return it (an event file with a hole is not written).
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::chief

#endif  // LOCKSTEP_WORKER_CHIEF_EVENT_WRITER_H_
