// Loud skips: a test that needs something a CI machine is known to have (root, network
// namespaces, IPv6 loopback, Prometheus, Open MPI) skips where it is missing on a
// developer's machine, and fails under CI (CI=true in the environment, which tools/test.sh
// passes into Bazel's test environment), so that a missing capability cannot pass as green.
//
//   if (!HaveIpv6Loopback()) LS_SKIP_OR_FAIL_UNLESS_CI("IPv6 loopback (::1)") << why;
//
// Like GTEST_SKIP() it returns from the current function (a test body, SetUp or a void
// helper) and takes further detail with <<.
#ifndef LOCKSTEP_COMMON_CI_SKIP_H_
#define LOCKSTEP_COMMON_CI_SKIP_H_

#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

// True when the environment says CI=true.
bool RunningUnderCi();

// kSkip locally, kFatalFailure under CI.
::testing::TestPartResult::Type CiSkipResultType();

// "<capability> unavailable" locally; under CI, also that CI machines must have it.
std::string CiSkipMessage(const std::string& capability);

}  // namespace testing
}  // namespace lockstep

#define LS_SKIP_OR_FAIL_UNLESS_CI(capability)                                      \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__,                                     \
                           ::lockstep::testing::CiSkipMessage(capability).c_str(), \
                           ::lockstep::testing::CiSkipResultType())

#endif  // LOCKSTEP_COMMON_CI_SKIP_H_
