// JobStore over SQLite: opening (schema, unreadable rows quarantined), the job rows, retention,
// the named transitions enforced, attempts and progress. One file of about 600 lines on
// purpose: every statement runs under the one connection's mutex, beside the schema it uses.
#include "coordinator/job_store/job_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace {

using ::lockstep::v1::JobProgress;
using ::lockstep::v1::JobRecord;
using ::lockstep::v1::JobState;

constexpr int kSchemaVersion = 1;

// One prepared statement, finalized on destruction.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  int prepare_rc() const { return rc_; }
  sqlite3_stmt* get() { return stmt_; }
  void BindText(int i, absl::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindInt(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  absl::string_view ColumnBlob(int i) {
    const void* p = sqlite3_column_blob(stmt_, i);
    return absl::string_view(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, i));
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Whether `blob` parses as a JobRecord (into `record`).
bool ParsesAsRecord(absl::string_view blob, JobRecord* record) {
  return blob.size() <= static_cast<size_t>(std::numeric_limits<int>::max()) &&
         record->ParseFromArray(blob.data(), static_cast<int>(blob.size()));
}

// The current attempt's workers (rank order) and evaluator, replacing the ones recorded.
void SetAttempt(JobRecord& record, std::vector<v1::AttemptWorkerRecord> workers,
                std::optional<v1::AttemptWorkerRecord> evaluator) {
  record.clear_attempt_workers();
  for (v1::AttemptWorkerRecord& w : workers) *record.add_attempt_workers() = std::move(w);
  record.clear_attempt_evaluator();
  if (evaluator.has_value()) *record.mutable_attempt_evaluator() = std::move(*evaluator);
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(Options options) {
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  const std::string& dir = options.state_dir;
  if (dir.empty()) return absl::InvalidArgumentError("--state_dir: must be set");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat("--state_dir: cannot create '", dir,
                                                   "': ", std::strerror(errno),
                                                   "; check that its parent exists"));
  }
  const std::string path = dir + "/jobs.sqlite3";
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::InvalidArgumentError(
        absl::StrCat("--state_dir: cannot open job database '", path, "': ", message));
  }
  std::unique_ptr<JobStore> store(new JobStore(path, db, clock,
                                               std::move(options.fail_write_for_test),
                                               std::move(options.fail_read_for_test)));
  absl::MutexLock lock(&store->mu_);
  sqlite3_busy_timeout(db, 0);  // another holder is an error, not something to wait for
  auto open_error = [&](int rc, absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(store->mu_) {
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      return absl::FailedPreconditionError(
          absl::StrCat("--state_dir: job database '", path,
                       "' is in use by another process; check that no other coordinator uses "
                       "this state_dir"));
    }
    return store->SqliteError(rc, what);
  };
  // Exclusive locking: the lock is taken by the first transaction below and held until
  // close, so one coordinator owns the state_dir. In this mode WAL needs no -shm file.
  for (const char* pragma :
       {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
    rc = sqlite3_exec(db, pragma, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return open_error(rc, pragma);
  }
  rc = sqlite3_exec(db,
                    "BEGIN EXCLUSIVE;"
                    "CREATE TABLE IF NOT EXISTS jobs ("
                    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                    "  id TEXT NOT NULL UNIQUE,"
                    "  state INTEGER NOT NULL,"
                    "  record BLOB NOT NULL);"
                    "COMMIT;",
                    nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return open_error(rc, "create the jobs table");
  }
  {
    // journal_mode answers the mode in force; anything but WAL would be silently slower and
    // differently durable, so refuse it (e.g. a file system without shared-memory support).
    Statement mode(db, "PRAGMA journal_mode");
    if (mode.prepare_rc() != SQLITE_OK || mode.Step() != SQLITE_ROW) {
      return open_error(sqlite3_errcode(db), "read the journal mode");
    }
    std::string got(reinterpret_cast<const char*>(sqlite3_column_text(mode.get(), 0)));
    if (got != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("--state_dir: job database '", path, "' cannot use WAL journaling (got ",
                       got, "); check the file system under the state_dir"));
    }
  }
  Statement version(db, "PRAGMA user_version");
  if (version.prepare_rc() != SQLITE_OK || version.Step() != SQLITE_ROW) {
    return store->SqliteError(sqlite3_errcode(db), "read the schema version");
  }
  const int64_t stored_version = sqlite3_column_int64(version.get(), 0);
  if (stored_version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state_dir: job database '", path, "' has schema version ", stored_version,
                     ", newer than this build's ", kSchemaVersion, "; run a newer coordinator"));
  }
  if (stored_version < kSchemaVersion) {
    std::string set = absl::StrCat("PRAGMA user_version=", kSchemaVersion);
    rc = sqlite3_exec(db, set.c_str(), nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return store->SqliteError(rc, "set the schema version");
  }
  LS_RETURN_IF_ERROR(store->QuarantineUnreadableLocked());
  return store;
}

JobRecord JobStore::RecordOfRow(absl::string_view blob, absl::string_view id, int64_t seq) const {
  JobRecord record;
  if (ParsesAsRecord(blob, &record)) return record;
  return UnreadableRecord(
      id, seq,
      absl::StrCat(blob.size(),
                   " bytes that do not parse as a lockstep.v1.JobRecord): its spec, attempts and "
                   "progress are lost; the row is kept for inspection until retention deletes it; "
                   "resubmit the job"));
}

JobRecord JobStore::UnreadableRecord(absl::string_view id, int64_t seq,
                                     absl::string_view why) const {
  // What stands for it: the job is over, and says why and where to look.
  JobRecord record;
  record.set_id(std::string(id));
  record.set_state(v1::FAILED);
  record.set_reason(absl::StrCat("the coordinator's job store '", path_,
                                 "' holds an unreadable record for job ", id, " (row ", seq, ": ",
                                 why));
  return record;
}

absl::StatusOr<std::vector<JobStore::Row>> JobStore::ListRowsLocked(int limit) {
  // The id index holds every (id, seq) pair, so this reads neither the table's pages nor
  // any record: a damaged row cannot fail the listing, only its own read below.
  Statement select(db_,
                   "SELECT seq, id FROM jobs INDEXED BY sqlite_autoindex_jobs_1 "
                   "ORDER BY seq DESC LIMIT ?1");
  if (select.prepare_rc() != SQLITE_OK) {
    return SqliteError(select.prepare_rc(), "list the stored job ids");
  }
  select.BindInt(1, limit > 0 ? limit : -1);  // a negative LIMIT means none
  std::vector<Row> rows;
  int rc;
  while ((rc = select.Step()) == SQLITE_ROW) {
    rows.push_back(
        Row{sqlite3_column_int64(select.get(), 0),
            std::string(reinterpret_cast<const char*>(sqlite3_column_text(select.get(), 1)),
                        sqlite3_column_bytes(select.get(), 1))});
  }
  if (rc != SQLITE_DONE) return SqliteError(rc, "list the stored job ids");
  return rows;
}

JobStore::RowRead JobStore::ReadRowLocked(const Row& row) {
  RowRead read;
  if (fail_read_) {
    if (const int rc = fail_read_(row.id); rc != SQLITE_OK) {
      read.error =
          absl::StrCat("SQLite cannot read it: ", sqlite3_errstr(rc), " (sqlite code ", rc, ")");
      return read;
    }
  }
  Statement select(db_, "SELECT state, record FROM jobs WHERE seq = ?1");
  int rc = select.prepare_rc();
  if (rc == SQLITE_OK) {
    select.BindInt(1, row.seq);
    rc = select.Step();
  }
  if (rc == SQLITE_ROW) {
    read.state = static_cast<JobState>(sqlite3_column_int64(select.get(), 0));
    read.blob = std::string(select.ColumnBlob(1));  // the step read it: damage fails the step
  }
  if (rc == SQLITE_DONE) {
    read.error = "the id index names this row but the jobs table has none: the file is damaged";
  } else if (rc != SQLITE_ROW) {
    read.error =
        absl::StrCat("SQLite cannot read it: ", sqlite3_errmsg(db_), " (sqlite code ", rc, ")");
  }
  return read;
}

JobRecord JobStore::RecordOfRead(const Row& row, const RowRead& read) const {
  if (read.error.empty()) return RecordOfRow(read.blob, row.id, row.seq);
  return UnreadableRecord(
      row.id, row.seq,
      absl::StrCat(read.error,
                   "): its spec, attempts and progress are lost to this coordinator; resubmit "
                   "the job; the row stays as it is: to rebuild the file from the rows SQLite "
                   "can still read, stop the coordinator and use `sqlite3 ",
                   path_, " .recover` or `.dump` (see coordinator/job_store/README.md)"));
}

absl::Status JobStore::QuarantineUnreadableLocked() {
  absl::StatusOr<std::vector<Row>> rows = ListRowsLocked(0);
  if (!rows.ok()) {
    return absl::DataLossError(absl::StrCat(
        "--state_dir: job database '", path_, "' is damaged: cannot list its jobs (",
        rows.status().message(),
        "); keep a copy of the file and rebuild it from the rows SQLite can still read with "
        "`sqlite3 ",
        path_,
        " .recover` (or `.dump` where that shell has no sqlite_dbpage "
        "table, as Debian's): the steps are in coordinator/job_store/README.md"));
  }
  for (const Row& row : *rows) {
    RowRead read = ReadRowLocked(row);
    if (!read.error.empty()) {
      // SQLite cannot read the row, so it cannot rewrite it either: every read answers the
      // job FAILED instead, and the row stays as it is for `sqlite3 .recover`.
      spdlog::error("job {}: {}", row.id, RecordOfRead(row, read).reason());
      continue;
    }
    JobRecord parsed;
    if (read.state == v1::FAILED || ParsesAsRecord(read.blob, &parsed)) continue;
    spdlog::error("job {}: {}", row.id, RecordOfRow(read.blob, row.id, row.seq).reason());
    // The state column (what retention selects by) says FAILED; the bytes stay. Should the
    // write fail, every read still answers FAILED: the coordinator serves on.
    absl::Status status = WriteFault(absl::StrCat("update job ", row.id));
    Statement update(db_, "UPDATE jobs SET state = ?1 WHERE seq = ?2");
    if (status.ok() && update.prepare_rc() != SQLITE_OK) {
      status = SqliteError(update.prepare_rc(), absl::StrCat("mark job ", row.id, " FAILED"));
    }
    if (status.ok()) {
      update.BindInt(1, v1::FAILED);
      update.BindInt(2, row.seq);
      if (int rc = update.Step(); rc != SQLITE_DONE) {
        status = SqliteError(rc, absl::StrCat("mark job ", row.id, " FAILED"));
      }
    }
    if (!status.ok()) spdlog::warn("job {}: {}", row.id, status.ToString());
  }
  return absl::OkStatus();
}

absl::Status JobStore::WriteFault(absl::string_view write) const {
  if (!fail_write_) return absl::OkStatus();
  absl::Status status = fail_write_(write);
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("job database '", path_, "': ", write, ": ", status.message()));
}

JobStore::~JobStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

int64_t JobStore::NowMicros() const { return absl::ToUnixMicros(clock_->Now()); }

absl::Status JobStore::SqliteError(int rc, absl::string_view what) {
  return absl::Status(CodeFor(rc), absl::StrCat("job database '", path_, "': ", what, ": ",
                                                sqlite3_errmsg(db_), " (sqlite code ", rc, ")"));
}

absl::StatusOr<JobRecord> JobStore::Create(absl::string_view name, std::string spec,
                                           std::string plan) {
  absl::MutexLock lock(&mu_);
  const int64_t now = NowMicros();
  JobRecord record;
  record.set_name(std::string(name));
  record.set_spec(std::move(spec));
  record.set_plan(std::move(plan));
  record.set_state(v1::PENDING);
  record.set_reason("submitted");
  record.set_created_unix_micros(now);
  record.set_updated_unix_micros(now);
  v1::JobTransition* t = record.add_transitions();
  t->set_state(v1::PENDING);
  t->set_unix_micros(now);
  t->set_reason("submitted");

  LS_RETURN_IF_ERROR(WriteFault("create a job"));
  // The id comes from the row's AUTOINCREMENT key (never reused, even after a delete), so
  // insert, read the key back and fill the id in, all in one transaction.
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(rc, "begin a transaction to create a job");
  auto fail = [&](int rc, absl::string_view what) {
    absl::Status status = SqliteError(rc, what);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return status;
  };
  {
    Statement insert(db_, "INSERT INTO jobs (id, state, record) VALUES ('', 0, x'')");
    if (insert.prepare_rc() != SQLITE_OK || (rc = insert.Step()) != SQLITE_DONE) {
      return fail(sqlite3_errcode(db_), "insert a new job");
    }
  }
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  record.set_id(absl::StrFormat("job-%06d", seq));
  {
    Statement update(db_, "UPDATE jobs SET id = ?1, state = ?2, record = ?3 WHERE seq = ?4");
    if (update.prepare_rc() != SQLITE_OK) return fail(sqlite3_errcode(db_), "store a new job");
    update.BindText(1, record.id());
    update.BindInt(2, record.state());
    update.BindBlob(3, record.SerializeAsString());
    update.BindInt(4, seq);
    if (update.Step() != SQLITE_DONE) {
      return fail(sqlite3_errcode(db_), absl::StrCat("store new job ", record.id()));
    }
  }
  rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return fail(rc, absl::StrCat("commit new job ", record.id()));
  return record;
}

absl::StatusOr<JobRecord> JobStore::GetLocked(absl::string_view id) {
  // The seq from the id index, then the row itself, so that a damaged row answers its job
  // FAILED rather than an error.
  Statement select(db_, "SELECT seq FROM jobs INDEXED BY sqlite_autoindex_jobs_1 WHERE id = ?1");
  if (select.prepare_rc() != SQLITE_OK) {
    return SqliteError(select.prepare_rc(), absl::StrCat("read job ", id));
  }
  select.BindText(1, id);
  int rc = select.Step();
  if (rc == SQLITE_DONE) {
    return absl::NotFoundError(absl::StrCat("job ", id, " not found; `lockstep jobs` lists them"));
  }
  if (rc != SQLITE_ROW) return SqliteError(rc, absl::StrCat("read job ", id));
  const Row row{sqlite3_column_int64(select.get(), 0), std::string(id)};
  return RecordOfRead(row, ReadRowLocked(row));
}

absl::Status JobStore::PutLocked(const JobRecord& record) {
  LS_RETURN_IF_ERROR(WriteFault(absl::StrCat("update job ", record.id())));
  Statement update(db_, "UPDATE jobs SET state = ?1, record = ?2 WHERE id = ?3");
  if (update.prepare_rc() != SQLITE_OK) {
    return SqliteError(update.prepare_rc(), absl::StrCat("update job ", record.id()));
  }
  update.BindInt(1, record.state());
  update.BindBlob(2, record.SerializeAsString());
  update.BindText(3, record.id());
  int rc = update.Step();
  if (rc != SQLITE_DONE) return SqliteError(rc, absl::StrCat("update job ", record.id()));
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> JobStore::Get(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  return GetLocked(id);
}

absl::StatusOr<std::vector<JobRecord>> JobStore::List(int limit) {
  absl::MutexLock lock(&mu_);
  {
    // One scan of the table: all it costs when every row reads.
    Statement select(db_, "SELECT id, record, seq FROM jobs ORDER BY seq DESC LIMIT ?1");
    select.BindInt(1, limit > 0 ? limit : -1);  // a negative LIMIT means none
    std::vector<JobRecord> records;
    int rc = select.prepare_rc();
    while (rc == SQLITE_OK && (rc = select.Step()) == SQLITE_ROW) {
      absl::string_view id(reinterpret_cast<const char*>(sqlite3_column_text(select.get(), 0)),
                           sqlite3_column_bytes(select.get(), 0));
      if (fail_read_ && fail_read_(id) != SQLITE_OK) break;  // as a damaged page would
      records.push_back(
          RecordOfRow(select.ColumnBlob(1), id, sqlite3_column_int64(select.get(), 2)));
      rc = SQLITE_OK;
    }
    if (rc == SQLITE_DONE) return records;
  }
  // A row SQLite cannot read failed the scan: the ids from the id index, then row by row.
  LS_ASSIGN_OR_RETURN(std::vector<Row> rows, ListRowsLocked(limit));
  std::vector<JobRecord> records;
  records.reserve(rows.size());
  for (const Row& row : rows) records.push_back(RecordOfRead(row, ReadRowLocked(row)));
  return records;
}

absl::StatusOr<std::vector<std::string>> JobStore::EndedBeyond(int keep) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  {
    // The id and state columns come before the record, so its pages are not read.
    Statement select(db_,
                     "SELECT id FROM jobs WHERE state IN (?1, ?2, ?3) ORDER BY seq DESC "
                     "LIMIT -1 OFFSET ?4");
    select.BindInt(1, v1::SUCCEEDED);
    select.BindInt(2, v1::FAILED);
    select.BindInt(3, v1::CANCELLED);
    select.BindInt(4, std::max(0, keep));
    int rc = select.prepare_rc();
    while (rc == SQLITE_OK && (rc = select.Step()) == SQLITE_ROW) {
      ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(select.get(), 0)),
                       sqlite3_column_bytes(select.get(), 0));
      if (fail_read_ && fail_read_(ids.back()) != SQLITE_OK) break;  // as a damaged page would
      rc = SQLITE_OK;
    }
    if (rc == SQLITE_DONE) {
      std::reverse(ids.begin(), ids.end());
      return ids;
    }
  }
  // A row SQLite cannot read failed the scan: the ids from the id index, then row by row.
  ids.clear();
  LS_ASSIGN_OR_RETURN(std::vector<Row> rows, ListRowsLocked(0));
  int ended = 0;
  for (const Row& row : rows) {
    RowRead read = ReadRowLocked(row);
    // A row SQLite cannot read cannot be deleted either (see Delete): it counts for nothing.
    if (!read.error.empty() || !IsTerminalJobState(read.state)) continue;
    if (++ended > std::max(0, keep)) ids.push_back(row.id);
  }
  std::reverse(ids.begin(), ids.end());
  return ids;
}

absl::Status JobStore::Delete(const std::vector<std::string>& ids) {
  if (ids.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  LS_RETURN_IF_ERROR(WriteFault("delete ended jobs"));
  // SQLite needs a row's pages to delete it: a row it cannot read (a damaged page of its
  // record) would fail the whole deletion, so it stays, for an operator to rebuild the file.
  // Checked before the transaction: a read error inside one can end it.
  std::vector<std::string> readable;
  for (const std::string& id : ids) {
    Statement select(db_, "SELECT seq FROM jobs WHERE id = ?1");
    if (select.prepare_rc() != SQLITE_OK) {
      return SqliteError(select.prepare_rc(), absl::StrCat("read job ", id));
    }
    select.BindText(1, id);
    int rc = select.Step();
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return SqliteError(rc, absl::StrCat("read job ", id));
    const Row row{sqlite3_column_int64(select.get(), 0), id};
    if (RowRead read = ReadRowLocked(row); !read.error.empty()) {
      spdlog::warn("job {}: not deleted: row {}: {}", id, row.seq, read.error);
      continue;
    }
    readable.push_back(id);
  }
  if (readable.empty()) return absl::OkStatus();
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(rc, "begin a transaction to delete jobs");
  auto rollback = [&](absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return status;
  };
  for (const std::string& id : readable) {
    Statement select(db_, "SELECT state FROM jobs WHERE id = ?1");
    if (select.prepare_rc() != SQLITE_OK) {
      return rollback(SqliteError(select.prepare_rc(), absl::StrCat("read job ", id)));
    }
    select.BindText(1, id);
    rc = select.Step();
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return rollback(SqliteError(rc, absl::StrCat("read job ", id)));
    const auto state = static_cast<JobState>(sqlite3_column_int64(select.get(), 0));
    if (!IsTerminalJobState(state)) {
      return rollback(absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " is ", v1::JobState_Name(state), ": only ended jobs are deleted")));
    }
    Statement del(db_, "DELETE FROM jobs WHERE id = ?1");
    if (del.prepare_rc() != SQLITE_OK) {
      return rollback(SqliteError(del.prepare_rc(), absl::StrCat("delete job ", id)));
    }
    del.BindText(1, id);
    if ((rc = del.Step()) != SQLITE_DONE) {
      return rollback(SqliteError(rc, absl::StrCat("delete job ", id)));
    }
  }
  rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return rollback(SqliteError(rc, "commit the deletion of ended jobs"));
  return absl::OkStatus();
}

absl::Status JobStore::TransitionLocked(JobRecord& record, JobState to, absl::string_view reason,
                                        bool counts_as_restart) {
  if (!FindJobTransition(record.state(), to).has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", record.id(), " is ", v1::JobState_Name(record.state()), ", cannot become ",
        v1::JobState_Name(to), IsTerminalJobState(record.state()) ? " (it has ended)" : ""));
  }
  const int64_t now = NowMicros();
  if (to == v1::RUNNING) record.set_attempt(record.attempt() + 1);
  if (to == v1::RESTARTING && counts_as_restart) record.set_restarts(record.restarts() + 1);
  record.set_state(to);
  record.set_reason(std::string(reason));
  record.set_updated_unix_micros(now);
  v1::JobTransition* t = record.add_transitions();
  t->set_state(to);
  t->set_unix_micros(now);
  t->set_reason(std::string(reason));
  t->set_attempt(record.attempt());
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> JobStore::UpdateState(absl::string_view id, JobState to,
                                                absl::string_view reason, bool counts_as_restart) {
  absl::MutexLock lock(&mu_);
  LS_ASSIGN_OR_RETURN(JobRecord record, GetLocked(id));
  LS_RETURN_IF_ERROR(TransitionLocked(record, to, reason, counts_as_restart));
  LS_RETURN_IF_ERROR(PutLocked(record));
  return record;
}

absl::StatusOr<JobRecord> JobStore::StartAttempt(absl::string_view id, absl::string_view reason,
                                                 std::vector<v1::AttemptWorkerRecord> workers,
                                                 std::optional<v1::AttemptWorkerRecord> evaluator) {
  absl::MutexLock lock(&mu_);
  LS_ASSIGN_OR_RETURN(JobRecord record, GetLocked(id));
  LS_RETURN_IF_ERROR(TransitionLocked(record, v1::RUNNING, reason, true));
  SetAttempt(record, std::move(workers), std::move(evaluator));
  LS_RETURN_IF_ERROR(PutLocked(record));
  return record;
}

absl::StatusOr<JobRecord> JobStore::SetAttemptWorkers(
    absl::string_view id, std::vector<v1::AttemptWorkerRecord> workers,
    std::optional<v1::AttemptWorkerRecord> evaluator) {
  absl::MutexLock lock(&mu_);
  LS_ASSIGN_OR_RETURN(JobRecord record, GetLocked(id));
  if (record.state() != v1::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", v1::JobState_Name(record.state()), ", not RUNNING: no attempt"));
  }
  SetAttempt(record, std::move(workers), std::move(evaluator));
  LS_RETURN_IF_ERROR(PutLocked(record));
  return record;
}

absl::StatusOr<JobRecord> JobStore::UpdateProgress(absl::string_view id, JobProgress progress) {
  absl::MutexLock lock(&mu_);
  LS_ASSIGN_OR_RETURN(JobRecord record, GetLocked(id));
  if (record.state() != v1::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", v1::JobState_Name(record.state()), ", not RUNNING: progress dropped"));
  }
  const int64_t now = NowMicros();
  progress.set_unix_micros(now);
  *record.mutable_progress() = std::move(progress);
  record.set_updated_unix_micros(now);
  LS_RETURN_IF_ERROR(PutLocked(record));
  return record;
}

}  // namespace lockstep
