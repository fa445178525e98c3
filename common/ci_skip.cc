#include "common/ci_skip.h"

#include <cstdlib>
#include <cstring>

namespace lockstep {
namespace testing {

bool RunningUnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

::testing::TestPartResult::Type CiSkipResultType() {
  return RunningUnderCi() ? ::testing::TestPartResult::kFatalFailure
                          : ::testing::TestPartResult::kSkip;
}

std::string CiSkipMessage(const std::string& capability) {
  if (RunningUnderCi()) {
    return capability +
           " unavailable, and CI machines have it (CI=true): check the machine's set-up "
           "(tools/bootstrap.sh, root, network namespaces)";
  }
  return capability + " unavailable here (skipped; under CI=true this fails)";
}

}  // namespace testing
}  // namespace lockstep
