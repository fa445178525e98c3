#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockstep {
namespace {

absl::Status NotWritable(absl::string_view field, const std::string& dir, absl::string_view why,
                         absl::string_view check) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": directory '", dir, "' is not writable: ", why, "; check ", check));
}

}  // namespace

absl::Status CheckDirWritableWithoutCreating(const std::string& dir, absl::string_view field) {
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty path"));
  // Walk down from the root (or the working directory) while the components exist.
  std::string existing = dir[0] == '/' ? "/" : ".";
  bool whole = true;  // every component exists
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    std::string next = absl::StrCat(existing == "/" ? "" : existing, "/", part);
    struct stat st;
    if (::stat(next.c_str(), &st) != 0) {
      if (errno == ENOENT && ::lstat(next.c_str(), &st) == 0) {
        return NotWritable(field, dir, absl::StrCat("'", next, "' is a link to nothing"),
                           "the link, or choose another directory");
      }
      if (errno == ENOENT) {  // the rest would be created under `existing`
        whole = false;
        break;
      }
      return NotWritable(field, dir, absl::StrCat("cannot look up '", next, "': ", strerror(errno)),
                         "that this process may search every directory on the path");
    }
    if (!S_ISDIR(st.st_mode)) {
      return NotWritable(field, dir, absl::StrCat("'", next, "' exists and is not a directory"),
                         "the path: every part of it that exists must be a directory");
    }
    existing = std::move(next);
  }
  struct stat st;
  if (::stat(existing.c_str(), &st) == 0 && (st.st_mode & 0222) == 0) {
    // Root passes access() on any directory of a read-write file system; a directory whose
    // mode lets nobody write (as /proc and /sys) is read-only for it too.
    return NotWritable(field, dir,
                       whole ? std::string("its mode lets nobody write to it")
                             : absl::StrCat("cannot create it in '", existing,
                                            "': its mode lets nobody write to it"),
                       "that it is (or its nearest existing parent is) a directory this process "
                       "may create files in");
  }
  if (::faccessat(AT_FDCWD, existing.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    return NotWritable(
        field, dir,
        whole ? std::string(strerror(errno))
              : absl::StrCat("cannot create it in '", existing, "': ", strerror(errno)),
        "that it is (or its nearest existing parent is) a directory this process may create "
        "files in");
  }
  return absl::OkStatus();
}

}  // namespace lockstep
