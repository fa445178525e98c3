#include "coordinator/job_store/job_store_testing.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::Status CorruptStoredRecord(const std::string& state_dir, const std::string& id) {
  const std::string path = state_dir + "/jobs.sqlite3";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("open ", path, ": ", message));
  }
  // 0xff: a field number with wire type 7, which no protobuf message parses.
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "UPDATE jobs SET record = x'ffffffff' WHERE id = ?1", -1, &stmt,
                              nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    rc = sqlite3_step(stmt);
  }
  sqlite3_finalize(stmt);
  const int changed = sqlite3_changes(db);
  std::string message = sqlite3_errmsg(db);
  sqlite3_close(db);
  if (rc != SQLITE_DONE) return absl::InternalError(absl::StrCat("update ", path, ": ", message));
  if (changed != 1) return absl::NotFoundError(absl::StrCat("no job ", id, " in ", path));
  return absl::OkStatus();
}

}  // namespace lockstep
