// Test helpers for JobStore: damage a stored job the way a torn write or a bad disk would,
// from outside the store (its SQLite file, while no JobStore holds it open). Test-only.
#ifndef LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_
#define LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_

#include <string>

#include "absl/status/status.h"

namespace lockstep {

// Replaces the stored record of job `id` in <state_dir>/jobs.sqlite3 with bytes that do not
// parse as a JobRecord (its state column is left as it was). NOT_FOUND for no such job.
absl::Status CorruptStoredRecord(const std::string& state_dir, const std::string& id);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_STORE_JOB_STORE_TESTING_H_
