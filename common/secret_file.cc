#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {

absl::Status CheckSecretMode(const std::string& path, absl::string_view flag, uid_t owner,
                             mode_t mode) {
  const mode_t group = mode & S_IRWXG;
  const mode_t others = mode & S_IRWXO;
  // Group read (and search) is the administrator's way to hand a root-owned secret to one
  // service; group write never is.
  const bool group_ok = group == 0 || (owner == 0 && (group & S_IWGRP) == 0);
  if (others == 0 && group_ok) return absl::OkStatus();
  const std::string whom = others != 0 ? "every user" : "its group";
  return absl::PermissionDeniedError(absl::StrFormat(
      "%s: %s is open to %s (mode %04o, owner uid %d): a private key or tokens file must be "
      "readable by its owner only (or, owned by root, by a group that only this daemon's user "
      "is in); fix it with `chmod 600 %s`",
      flag, path, whom, mode & 07777, owner, path));
}

absl::Status CheckSecretFile(const std::string& path, absl::string_view flag) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path, ": ", strerror(errno)));
  }
  return CheckSecretMode(path, flag, st.st_uid, st.st_mode);
}

absl::Status WritePrivateFile(const std::string& path, absl::string_view contents) {
  // A new file beside `path`, 0600 from its creation (O_EXCL: never someone else's), then
  // renamed over it: a reader sees the old contents or the new, never a part.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  }
  bool ok = ::fchmod(fd, 0600) == 0;  // the umask may have narrowed it, never widened
  size_t done = 0;
  while (ok && done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  int saved = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(saved)));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
