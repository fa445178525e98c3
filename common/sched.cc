#include "common/sched.h"

#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view list, absl::string_view what) {
  std::vector<int> cpus;
  auto bad = [&](absl::string_view element, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", list, "\": ", why, " \"", element,
                                                   "\" (expected e.g. \"0-3,6\")"));
  };
  if (list.empty()) return bad(list, "no CPUs in");
  for (absl::string_view element : absl::StrSplit(list, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(element, absl::MaxSplits('-', 1));
    int first = -1, last = -1;
    if (!absl::SimpleAtoi(ends[0], &first) || first < 0 || !absl::SimpleAtoi(ends.back(), &last) ||
        last < 0) {
      return bad(element, "not a CPU number or range:");
    }
    if (last < first) return bad(element, "a range that runs backwards:");
    if (last >= CPU_SETSIZE) {
      return bad(element, absl::StrCat("CPUs go up to ", CPU_SETSIZE - 1, ":"));
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

absl::Status SetCpuAffinity(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPUs given to run on");
  const std::vector<int> allowed = AllowedCpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CPU ", c, " is not available to this process (allowed: ", FormatCpuList(allowed), ")"));
    }
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) return Errno("sched_setaffinity");
  return absl::OkStatus();
}

std::vector<std::vector<int>> CpusPerWorker(int workers, int cpus_each,
                                            const std::vector<int>& allowed) {
  std::vector<std::vector<int>> cpus;
  if (workers < 2 || cpus_each < 1 || static_cast<size_t>(workers) * cpus_each > allowed.size()) {
    return cpus;
  }
  for (int w = 0; w < workers; ++w) {
    cpus.emplace_back(allowed.begin() + w * cpus_each, allowed.begin() + (w + 1) * cpus_each);
  }
  return cpus;
}

}  // namespace lockstep
