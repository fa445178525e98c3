#include "collectives/file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep {
namespace collectives {

std::string FileStore::PathFor(absl::string_view key) const {
  return absl::StrCat(dir_, "/", absl::BytesToHexString(key));
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  if (aborted_.load()) return absl::AbortedError(absl::StrCat("store aborted; Set(", key, ")"));
  const std::string path = PathFor(key);
  absl::BitGen gen;
  const std::string tmp = absl::StrCat(path, ".tmp", getpid(), "-", absl::Uniform<uint64_t>(gen));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), value.size());
    if (!out.good()) {
      return absl::UnavailableError(absl::StrCat("file store: cannot write ", tmp, "; check that ",
                                                 dir_, " exists and is writable"));
    }
  }
  // link() fails if the key exists: write-once without a race.
  int rc = link(tmp.c_str(), path.c_str());
  int err = errno;
  unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("store key '", key, "' is already set"));
    }
    return absl::UnavailableError(
        absl::StrCat("file store: link ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::Get(absl::string_view key, absl::Time deadline) {
  const std::string path = PathFor(key);
  absl::Duration backoff = absl::Microseconds(50);
  while (true) {
    if (aborted_.load()) return absl::AbortedError(absl::StrCat("store aborted; Get(", key, ")"));
    std::ifstream in(path, std::ios::binary);
    if (in.good()) {
      std::ostringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("store key '", key, "' not set in ", dir_,
                                                      " by the deadline; is every rank started?"));
    }
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Milliseconds(5));
  }
}

}  // namespace collectives
}  // namespace lockstep
