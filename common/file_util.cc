#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep {

absl::Status PathError(int err, absl::string_view what, absl::string_view path) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, " '", path, "': ", std::strerror(err)));
}

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PathError(errno, "open directory", dir);
  absl::Status status;
  if (::fsync(fd) != 0) status = PathError(errno, "fsync directory", dir);
  ::close(fd);
  return status;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PathError(errno, "open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return PathError(err, "read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("empty directory path");
  // Create every prefix ending before a '/', then the whole path.
  for (size_t pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1)) {
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return PathError(errno, "create directory", prefix);
    }
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return PathError(errno, "create directory", dir);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return PathError(errno, "stat", dir);
  if (!S_ISDIR(st.st_mode)) return PathError(ENOTDIR, "use as a directory", dir);
  return absl::OkStatus();
}

namespace {

absl::Status ProbeWrite(const std::string& dir) {
  LS_RETURN_IF_ERROR(MakeDirs(dir));
  std::string probe = dir + "/.lockstep-write-probe-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return PathError(errno, "create a file in", dir);
  absl::Status status = WriteAll(fd, "probe", probe);
  if (status.ok() && ::fsync(fd) != 0) status = PathError(errno, "fsync", probe);
  ::close(fd);
  ::unlink(probe.c_str());
  return status;
}

}  // namespace

absl::Status CheckWritable(const std::string& dir, absl::string_view field) {
  absl::Status status = ProbeWrite(dir);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": directory '", dir, "' is not writable: ", status.message(),
                   "; check that it is a directory this process may create files in"));
}

}  // namespace lockstep
