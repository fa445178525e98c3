#include "worker/test_hooks.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockstep {
namespace worker {

absl::StatusOr<TestHooks> ParseTestHooks(absl::string_view spec) {
  TestHooks hooks;
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("LOCKSTEP_TEST_HOOKS: \"", part, "\": ", what,
                       " (expected stall=input@STEP, stall=compute@STEP or slow_compute_ms=N)"));
    };
    std::vector<absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return bad("no '='");
    if (kv[0] == "stall") {
      std::vector<absl::string_view> at = absl::StrSplit(kv[1], absl::MaxSplits('@', 1));
      if (at.size() != 2 || !absl::SimpleAtoi(at[1], &hooks.stall_step) || hooks.stall_step < 1) {
        return bad("expected PHASE@STEP with STEP >= 1");
      }
      if (at[0] == "input") {
        hooks.stall_phase = v1::PHASE_INPUT;
      } else if (at[0] == "compute") {
        hooks.stall_phase = v1::PHASE_COMPUTE;
      } else {
        return bad("the phase is input or compute");
      }
    } else if (kv[0] == "slow_compute_ms") {
      int64_t ms = 0;
      if (!absl::SimpleAtoi(kv[1], &ms) || ms < 0) return bad("not a number of milliseconds");
      hooks.slow_compute = absl::Milliseconds(ms);
    } else {
      return bad("unknown hook");
    }
  }
  return hooks;
}

}  // namespace worker
}  // namespace lockstep
