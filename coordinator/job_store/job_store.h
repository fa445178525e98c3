// JobStore: the coordinator's durable record of every job, in SQLite under --state_dir
// (<state_dir>/jobs.sqlite3, WAL journal, synchronous=FULL). Every write is committed and
// fsynced before the method returns, so a job the coordinator accepted survives a crash
// or restart; reopening the store finds every job as it was last written.
//
// The job state machine is the table of named transitions in job_transitions.h: UpdateState
// and StartAttempt refuse any other move with FAILED_PRECONDITION, and leave the record as it
// was. Entering RUNNING increments `attempt`, entering RESTARTING `restarts` (not for a
// preemption).
// Every transition is appended to JobRecord.transitions with its time, reason and attempt.
//
// A record that cannot be read back (its bytes do not parse as a JobRecord: a torn or
// corrupted row) costs that job, not the coordinator: Open() marks its row FAILED (keeping
// the bytes for an operator to inspect) and every read answers a FAILED record with the job's
// id and a reason naming the store, the row and what to do. Retention deletes it as any
// other ended job.
//
// A row SQLite itself cannot read (a damaged page: SQLITE_CORRUPT, or an I/O error on it)
// costs that job too: when a scan of the table fails, the ids are listed from the id index
// alone and every record is read on its own, so such a row answers a FAILED record naming
// the store, the row and SQLite's error, and the other jobs are served. Such a row cannot be
// rewritten or deleted (SQLite needs its pages for that): retention leaves it for an operator
// to rebuild the file (README.md). Only when not even the ids can be listed does Open fail,
// with DATA_LOSS naming the file and the way.
//
// Ownership and threads: the store owns its SQLite connection, held in exclusive locking
// mode, so a second coordinator on the same state_dir is refused at Open. All methods are
// thread-safe; one mutex serializes them (SQLite calls included: they are local file I/O).
// Time comes from the injected Clock.
#ifndef LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_H_
#define LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/job_store/job_transitions.h"
#include "lockstep/v1/job.pb.h"

struct sqlite3;

namespace lockstep {

class JobStore {
 public:
  struct Options {
    std::string state_dir;   // created if missing (its parent must exist)
    Clock* clock = nullptr;  // null: the real clock
    // Tests only: called before every write ("create a job", "update job <id>", "delete
    // ended jobs"); a non-OK status is that write's error and nothing is written (a full
    // disk, a read-only file system). Leave empty otherwise.
    std::function<absl::Status(absl::string_view write)> fail_write_for_test;
    // Tests only: called before every read of one job's row with the job's id; a result
    // other than SQLITE_OK (0), e.g. SQLITE_CORRUPT or SQLITE_IOERR, is that read's SQLite
    // error (a damaged page, a bad sector). Leave empty otherwise.
    std::function<int(absl::string_view id)> fail_read_for_test;
  };

  // Opens (or creates) <state_dir>/jobs.sqlite3. INVALID_ARGUMENT naming --state_dir when
  // it cannot be created or opened; FAILED_PRECONDITION when another process holds it. A
  // stored job that cannot be read back is FAILED (see above), not an error.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(Options options);
  ~JobStore();

  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Stores a new PENDING job with a fresh id ("job-000001", "job-000002", ...: never
  // reused, sorting as submitted) and returns it. `spec` is the serialized JobSpec, `plan`
  // the serialized JobPlan it was lowered to (jobspec/lower.h).
  absl::StatusOr<lockstep::v1::JobRecord> Create(absl::string_view name, std::string spec,
                                                 std::string plan = "") ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND naming the id when there is no such job.
  absl::StatusOr<lockstep::v1::JobRecord> Get(absl::string_view id) ABSL_LOCKS_EXCLUDED(mu_);

  // Every job, newest first; at most `limit` of them when limit > 0.
  absl::StatusOr<std::vector<lockstep::v1::JobRecord>> List(int limit = 0) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves job `id` to `to` (see the state machine), recording `reason`. Entering RESTARTING
  // counts a restart unless `counts_as_restart` is false (a preemption). Returns the updated
  // record. NOT_FOUND, or FAILED_PRECONDITION naming the job, its state and `to`.
  absl::StatusOr<lockstep::v1::JobRecord> UpdateState(absl::string_view id,
                                                      lockstep::v1::JobState to,
                                                      absl::string_view reason,
                                                      bool counts_as_restart = true)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the job's next attempt: RUNNING (as UpdateState) with the attempt's workers and
  // evaluator (as SetAttemptWorkers) in one write, so that a failing write leaves the job
  // as it was (PENDING or RESTARTING), never RUNNING without its workers.
  absl::StatusOr<lockstep::v1::JobRecord> StartAttempt(
      absl::string_view id, absl::string_view reason,
      std::vector<lockstep::v1::AttemptWorkerRecord> workers,
      std::optional<lockstep::v1::AttemptWorkerRecord> evaluator = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Records the workers of the RUNNING job's current attempt (rank order) and its evaluator,
  // if it has one (JobSpec.evaluator), so that a restarted coordinator can re-adopt them.
  // FAILED_PRECONDITION unless RUNNING.
  absl::StatusOr<lockstep::v1::JobRecord> SetAttemptWorkers(
      absl::string_view id, std::vector<lockstep::v1::AttemptWorkerRecord> workers,
      std::optional<lockstep::v1::AttemptWorkerRecord> evaluator = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the latest progress figures of a RUNNING job (unix_micros is set to now).
  // FAILED_PRECONDITION when the job is not RUNNING (a late heartbeat: callers may ignore it).
  absl::StatusOr<lockstep::v1::JobRecord> UpdateProgress(absl::string_view id,
                                                         lockstep::v1::JobProgress progress)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ids of the ended jobs (SUCCEEDED, FAILED, CANCELLED) older than the newest `keep` ended
  // ones, oldest first: what a retention of `keep` ended jobs lets go.
  absl::StatusOr<std::vector<std::string>> EndedBeyond(int keep) ABSL_LOCKS_EXCLUDED(mu_);

  // Deletes the records of ended jobs `ids`, in one transaction (the file's pages are reused
  // by later jobs). FAILED_PRECONDITION naming a job that has not ended; an unknown id, or
  // one whose row SQLite cannot read (it could not delete it), is skipped. Ids are never reused
  // (the AUTOINCREMENT key remembers the highest).
  absl::Status Delete(const std::vector<std::string>& ids) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }

 private:
  JobStore(std::string path, sqlite3* db, Clock* clock,
           std::function<absl::Status(absl::string_view)> fail_write,
           std::function<int(absl::string_view)> fail_read)
      : path_(std::move(path)),
        clock_(clock),
        fail_write_(std::move(fail_write)),
        fail_read_(std::move(fail_read)),
        db_(db) {}

  // One stored job's row: its key and id, as the id index lists them.
  struct Row {
    int64_t seq;
    std::string id;
  };
  // What reading a row gave: its state column and record bytes, or (error non-empty) why
  // SQLite could not read it.
  struct RowRead {
    lockstep::v1::JobState state = lockstep::v1::JOB_STATE_UNSPECIFIED;
    std::string blob;
    std::string error;
  };

  // Marks the rows whose record does not parse FAILED and logs those SQLite cannot read
  // (Open). DATA_LOSS naming the file and `sqlite3 .recover` when not even the ids list.
  absl::Status QuarantineUnreadableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every job's row, newest first, at most `limit` (> 0), from the id index alone.
  absl::StatusOr<std::vector<Row>> ListRowsLocked(int limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads one row; an SQLite error is reported in the result, never returned.
  RowRead ReadRowLocked(const Row& row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The record a read gave, or the FAILED record that stands for an unreadable row.
  lockstep::v1::JobRecord RecordOfRead(const Row& row, const RowRead& read) const;
  // The record stored as `blob` in row `seq` for job `id`, or the FAILED record that stands
  // for it when it does not parse.
  lockstep::v1::JobRecord RecordOfRow(absl::string_view blob, absl::string_view id,
                                      int64_t seq) const;
  // The FAILED record that stands for job `id` in row `seq`, lost because of `why`.
  lockstep::v1::JobRecord UnreadableRecord(absl::string_view id, int64_t seq,
                                           absl::string_view why) const;
  // The injected write failure, if any (Options::fail_write_for_test).
  absl::Status WriteFault(absl::string_view write) const;
  // Moves `record` to `to` in memory (the state machine, counters and transition).
  absl::Status TransitionLocked(lockstep::v1::JobRecord& record, lockstep::v1::JobState to,
                                absl::string_view reason, bool counts_as_restart)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<lockstep::v1::JobRecord> GetLocked(absl::string_view id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutLocked(const lockstep::v1::JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SqliteError(int rc, absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NowMicros() const;

  const std::string path_;
  Clock* const clock_;
  const std::function<absl::Status(absl::string_view)> fail_write_;
  const std::function<int(absl::string_view)> fail_read_;
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_H_
