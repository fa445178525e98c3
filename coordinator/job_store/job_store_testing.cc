#include "coordinator/job_store/job_store_testing.h"

#include <sqlite3.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// Runs `sql` on <state_dir>/jobs.sqlite3 (after folding its WAL into the file, so that the
// file holds every page) and returns each row's integer columns.
absl::StatusOr<std::vector<std::vector<int64_t>>> QueryInts(const std::string& state_dir,
                                                            const std::string& sql,
                                                            const std::string& bind = "") {
  const std::string path = state_dir + "/jobs.sqlite3";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("open ", path, ": ", message));
  }
  std::vector<std::vector<int64_t>> rows;
  int rc = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  sqlite3_stmt* stmt = nullptr;
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (rc == SQLITE_OK && !bind.empty()) {
    sqlite3_bind_text(stmt, 1, bind.data(), static_cast<int>(bind.size()), SQLITE_TRANSIENT);
  }
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::vector<int64_t>& row = rows.emplace_back();
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      row.push_back(sqlite3_column_int64(stmt, i));
    }
    rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  std::string message = sqlite3_errmsg(db);
  sqlite3_close(db);
  if (rc != SQLITE_DONE) return absl::InternalError(absl::StrCat(sql, " on ", path, ": ", message));
  return rows;
}

absl::StatusOr<std::string> ReadPage(std::fstream& file, int64_t page_size, int64_t pageno) {
  std::string page(page_size, '\0');
  file.seekg((pageno - 1) * page_size);
  if (!file.read(page.data(), page_size)) return absl::InternalError("short read");
  return page;
}

}  // namespace

absl::Status ReplaceStoredRecord(const std::string& state_dir, const std::string& id,
                                 const std::string& record) {
  const std::string path = state_dir + "/jobs.sqlite3";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("open ", path, ": ", message));
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "UPDATE jobs SET record = ?2 WHERE id = ?1", -1, &stmt, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_blob(stmt, 2, record.data(), static_cast<int>(record.size()), SQLITE_TRANSIENT);
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

absl::Status CorruptStoredRecord(const std::string& state_dir, const std::string& id) {
  // 0xff: a field number with wire type 7, which no protobuf message parses.
  return ReplaceStoredRecord(state_dir, id, std::string(4, '\xff'));
}

absl::Status DamageStoredRecordPage(const std::string& state_dir, const std::string& id) {
  const std::string path = state_dir + "/jobs.sqlite3";
  absl::StatusOr<std::vector<std::vector<int64_t>>> size = QueryInts(state_dir, "PRAGMA page_size");
  if (!size.ok()) return size.status();
  const int64_t page_size = (*size)[0][0];
  // The job's record bytes, to recognize its overflow pages by their contents.
  std::string record;
  {
    sqlite3* db = nullptr;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT record FROM jobs WHERE id = ?1", -1, &stmt, nullptr) ==
            SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(stmt) == SQLITE_ROW) {
        record.assign(static_cast<const char*>(sqlite3_column_blob(stmt, 0)),
                      sqlite3_column_bytes(stmt, 0));
      }
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  if (record.empty()) return absl::NotFoundError(absl::StrCat("no job ", id, " in ", path));
  absl::StatusOr<std::vector<std::vector<int64_t>>> overflow = QueryInts(
      state_dir, "SELECT pageno FROM dbstat WHERE name = 'jobs' AND pagetype = 'overflow'");
  if (!overflow.ok()) return overflow.status();
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) return absl::InternalError(absl::StrCat("open ", path));
  for (const std::vector<int64_t>& row : *overflow) {
    absl::StatusOr<std::string> page = ReadPage(file, page_size, row[0]);
    if (!page.ok()) return page.status();
    // An overflow page: a 4-byte big-endian next page number, then the payload's bytes.
    const uint32_t next = (static_cast<uint32_t>(static_cast<uint8_t>((*page)[0])) << 24) |
                          (static_cast<uint32_t>(static_cast<uint8_t>((*page)[1])) << 16) |
                          (static_cast<uint32_t>(static_cast<uint8_t>((*page)[2])) << 8) |
                          static_cast<uint32_t>(static_cast<uint8_t>((*page)[3]));
    if (next == 0 || record.find(page->substr(4, 256)) == std::string::npos) continue;
    // A next page beyond the end of the file: SQLite finds the chain broken (SQLITE_CORRUPT).
    const char broken[4] = {'\x7f', '\xff', '\xff', '\xff'};
    file.seekp((row[0] - 1) * page_size);
    if (!file.write(broken, sizeof(broken)) || !file.flush()) {
      return absl::InternalError(absl::StrCat("write ", path));
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("job ", id, "'s record in ", path, " spans fewer than two overflow pages"));
}

absl::Status DamageIdIndex(const std::string& state_dir) {
  const std::string path = state_dir + "/jobs.sqlite3";
  absl::StatusOr<std::vector<std::vector<int64_t>>> size = QueryInts(state_dir, "PRAGMA page_size");
  if (!size.ok()) return size.status();
  absl::StatusOr<std::vector<std::vector<int64_t>>> root = QueryInts(
      state_dir, "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_jobs_1'");
  if (!root.ok()) return root.status();
  if (root->size() != 1) return absl::NotFoundError(absl::StrCat("no id index in ", path));
  const int64_t page_size = (*size)[0][0];
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::string garbage(page_size, '\xff');  // page type 0xff: no b-tree page has it
  file.seekp(((*root)[0][0] - 1) * page_size);
  if (!file || !file.write(garbage.data(), page_size) || !file.flush()) {
    return absl::InternalError(absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
