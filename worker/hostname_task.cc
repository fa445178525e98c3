#include "worker/hostname_task.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::worker {

absl::StatusOr<TaskRef> TaskFromHostname(absl::string_view hostname) {
  const absl::string_view name = hostname.substr(0, hostname.find('.'));
  const size_t dash = name.rfind('-');
  const absl::string_view digits =
      dash == absl::string_view::npos ? absl::string_view() : name.substr(dash + 1);
  bool all_digits = !digits.empty() && digits.size() <= 9;
  for (char c : digits) all_digits = all_digits && absl::ascii_isdigit(c);
  int index = 0;
  if (!all_digits || !absl::SimpleAtoi(digits, &index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task_index_from_hostname: host name \"", hostname,
        "\" does not end in -<ordinal> (a StatefulSet pod's name, e.g. lockstep-worker-0); "
        "run it in a StatefulSet or drop the flag"));
  }
  return TaskRef{"worker", index};
}

}  // namespace lockstep::worker
