// Test helpers for JobStore: damage a stored job the way a torn write or a bad disk would,
// from outside the store (its SQLite file, while no JobStore holds it open). Test-only.
#ifndef LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_
#define LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_

#include <string>

#include "absl/status/status.h"

namespace lockstep {

// Replaces the stored record of job `id` in <state_dir>/jobs.sqlite3 with `record`, as
// bytes (a row as another version of the coordinator wrote it); its state column is left as
// it was. NOT_FOUND for no such job.
absl::Status ReplaceStoredRecord(const std::string& state_dir, const std::string& id,
                                 const std::string& record);

// ReplaceStoredRecord with bytes that do not parse as a JobRecord.
absl::Status CorruptStoredRecord(const std::string& state_dir, const std::string& id);

// Damages a page of <state_dir>/jobs.sqlite3 that only job `id`'s row uses, the way a bad
// sector would, so that SQLite itself fails to read that row (SQLITE_CORRUPT): the record
// must span at least two overflow pages (a record over three pages long, e.g. a 20 KB spec,
// whose bytes no other row holds). Writes the file directly, past SQLite.
absl::Status DamageStoredRecordPage(const std::string& state_dir, const std::string& id);

// Damages the root page of the jobs' id index in <state_dir>/jobs.sqlite3 (a small store's
// whole index), so that not even the job ids can be listed.
absl::Status DamageIdIndex(const std::string& state_dir);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_
