#include "common/sched.h"

#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep {
namespace {

// struct sched_attr of <linux/sched/types.h>, which clashes with glibc's <sched.h>.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

absl::Status Errno(const char* what) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " for thread ", gettid()));
}

absl::Status GetAttr(SchedAttr* attr) {
  *attr = {};
  if (syscall(SYS_sched_getattr, 0, attr, sizeof(*attr), 0) != 0) return Errno("sched_getattr");
  return absl::OkStatus();
}

}  // namespace

absl::Status RequestSchedulerSlice(absl::Duration slice) {
  if (slice <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler slice must be positive, got ", absl::FormatDuration(slice)));
  }
  SchedAttr attr;
  LS_RETURN_IF_ERROR(GetAttr(&attr));
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) {
    return absl::OkStatus();  // real-time or idle: a slice means nothing there
  }
  attr.size = sizeof(attr);
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<uint64_t>(absl::ToInt64Nanoseconds(slice));
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) return Errno("sched_setattr");
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> CurrentSchedulerSlice() {
  SchedAttr attr;
  LS_RETURN_IF_ERROR(GetAttr(&attr));
  return absl::Nanoseconds(attr.sched_runtime);
}

}  // namespace lockstep
