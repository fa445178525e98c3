// DiagnosticsService: the coordinator's side of "seeing a stuck or slow job" (DESIGN.md,
// "When a job hangs"). Workers' heartbeats bring each rank's flight record and new log lines
// (OnHeartbeat); it keeps, per job, the latest record of every (attempt, task) with when it
// arrived, and each one's log lines (a bounded ring, each seq once). From them it answers:
//   Diagnose / Annotate: the hang verdict and stragglers of a running job (hang_verdict.h),
//     for `lockstep describe` (GetJobResponse.diagnosis) and `lockstep status`
//     (GetClusterStatusResponse.diagnoses);
//   Dump: every rank's latest flight record of the job's latest attempt (`lockstep dump`);
//   NextLogs: the job's log lines, one (attempt, task) batch at a time, waiting for new ones
//     when following, and the end of the stream once the job ended and its workers sent
//     their last lines (or two heartbeat intervals passed).
// What it keeps is bounded (DiagnosticsLimits, below, the one place for these numbers):
// OnHeartbeat accepts diagnostics only for attempts the calling task belongs to
// (JobService::RunsAttempt: one of the attempt's workers or its evaluator, while the attempt
// runs or its workers leave it); the rest are dropped silently, not refused: the heartbeat
// is the worker's liveness and an error would make a worker whose attempt just ended look
// failing. Per (attempt, task) it keeps a ring of lines bounded in count and bytes (the
// oldest go), drops single lines and flight records over their size, keeps the newest
// `attempts_per_job` attempts of a job and forgets the least recently updated job beyond
// `max_jobs`. Every drop is counted by reason (dropped(): the coordinator's metric
// lockstep_coordinator_diagnostics_dropped{reason}) and logged once per task and reason.
// Log text is kept as the worker sent it; whoever prints it escapes control characters
// (client/terminal_text.h).
//
// The gRPC handlers (DumpJob, GetJobLogs) are a few lines in grpc_job_service.cc over these
// (grpc_diagnostics.h); GrpcWorkerService::Heartbeat feeds OnHeartbeat.
// Ownership: borrows the JobService and the clock. Thread model: thread-safe; NextLogs
// blocks its caller up to its deadline; Shutdown() wakes it.
#ifndef LOCKSTEP_COORDINATOR_DIAGNOSTICS_SERVICE_H_
#define LOCKSTEP_COORDINATOR_DIAGNOSTICS_SERVICE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tf_config.h"
#include "coordinator/hang_verdict.h"
#include "coordinator/job_service.h"
#include "lockstep/v1/coordinator.pb.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace coordinator {

// What workers' diagnostics may hold in the coordinator's memory. Per (attempt, task), so
// per attempt at most its workers times these (an attempt's workers are bounded by the
// job's validated size); the coordinator's whole at most max_jobs * attempts_per_job
// attempts' worth.
struct DiagnosticsLimits {
  size_t log_lines_per_task = 10000;    // a ring: beyond it the oldest lines go
  size_t log_bytes_per_task = 4 << 20;  // the lines' text, a ring as well
  size_t max_line_bytes = 16 << 10;     // a longer line is dropped
  size_t max_record_bytes = 256 << 10;  // a larger flight record is dropped
  size_t attempts_per_job = 4;          // older attempts of a job are forgotten
  size_t max_jobs = 256;                // the least recently updated job beyond goes
};

// Why OnHeartbeat dropped something (the metric's `reason` label).
enum class DiagnosticsDrop {
  kNotItsAttempt,   // "not_its_attempt": the task is not a worker of that attempt
  kLineTooLong,     // "line_too_long"
  kRecordTooLarge,  // "record_too_large"
  kEvicted,         // "evicted": the oldest lines, past a task's count or bytes
};
inline constexpr DiagnosticsDrop kAllDiagnosticsDrops[] = {
    DiagnosticsDrop::kNotItsAttempt, DiagnosticsDrop::kLineTooLong,
    DiagnosticsDrop::kRecordTooLarge, DiagnosticsDrop::kEvicted};
const char* DiagnosticsDropName(DiagnosticsDrop drop);

struct DiagnosticsOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);
  DiagnosticsLimits limits;
  size_t log_lines_per_message = 1000;
  // Unless set here, min_wait is half a heartbeat interval and stale_after 1.5 intervals.
  VerdictOptions verdict;
};

class DiagnosticsService {
 public:
  DiagnosticsService(JobService* jobs, Clock* clock, DiagnosticsOptions options = {});

  // A heartbeat's diagnostics from `task` (the caller checked it holds the task). Keeps
  // only those of attempts `task` belongs to, within the limits; never fails.
  void OnHeartbeat(const TaskRef& task, const std::vector<v1::JobDiagnostics>& diagnostics);
  // What OnHeartbeat dropped since the start, by reason.
  int64_t dropped(DiagnosticsDrop reason) const;

  // The verdict and stragglers (only while the job is RUNNING) and every rank's latest record
  // of the job's current (else latest known) attempt.
  v1::JobDiagnosis Diagnose(const v1::JobRecord& job) const;
  // Sets response->diagnosis (the ranks' records left out: `lockstep dump` shows them).
  void Annotate(v1::GetJobResponse* response) const;
  // Adds a diagnosis for each running job with a hang verdict or stragglers.
  void Annotate(v1::GetClusterStatusResponse* response) const;
  // NOT_FOUND naming the job id.
  absl::StatusOr<v1::DumpJobResponse> Dump(const std::string& job_id) const;

  // What a GetJobLogs stream has sent so far.
  struct LogCursor {
    std::map<std::pair<int, TaskRef>, int64_t> sent;  // (attempt, task) -> last seq
    absl::Time job_ended = absl::InfiniteFuture();    // when the stream saw it ended
  };
  // The next batch of lines for `request` after `cursor`; a message with `end` set when
  // there are no more (at once without `follow`; after the job ended with it);
  // DEADLINE_EXCEEDED when nothing new came by `deadline`; NOT_FOUND for an unknown job;
  // UNAVAILABLE after Shutdown().
  absl::StatusOr<v1::JobLogLines> NextLogs(const v1::GetJobLogsRequest& request, LogCursor* cursor,
                                           absl::Time deadline);

  void Shutdown();

 private:
  struct TaskEntry {
    int rank = 0;
    bool has_record = false;
    v1::FlightRecord record;
    absl::Time received;
    std::deque<v1::LogLine> lines;
    size_t line_bytes = 0;  // of `lines`' text
    int64_t last_seq = 0;
    bool finished = false;
  };
  using Key = std::pair<int, TaskRef>;  // (attempt, task)
  struct JobEntry {
    std::map<Key, TaskEntry> tasks;
    absl::Time updated;
  };

  // Lines after the cursor for one matching stream, or nullopt.
  std::optional<v1::JobLogLines> TakeLines(const v1::GetJobLogsRequest& request,
                                           LogCursor* cursor) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every stream of the job's latest attempt sent its last lines.
  bool AllFinished(const std::string& job_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetOldJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the newest attempts_per_job attempts of `job`.
  void ForgetOldAttempts(JobEntry& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `n` drops of `reason` from `task`; the first of each (task, reason) is logged.
  void Drop(const TaskRef& task, const std::string& job_id, DiagnosticsDrop reason, int64_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobService* const jobs_;
  Clock* const clock_;
  const DiagnosticsOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, JobEntry> by_job_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every new line
  std::map<DiagnosticsDrop, int64_t> dropped_ ABSL_GUARDED_BY(mu_);
  // (task, reason) pairs already logged: one notice each, not one per heartbeat. Bounded by
  // the tasks the membership admits times the reasons.
  std::set<std::pair<TaskRef, DiagnosticsDrop>> noticed_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_DIAGNOSTICS_SERVICE_H_
