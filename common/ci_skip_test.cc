#include "common/ci_skip.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {
namespace {

// Sets CI for one scope and restores what was there.
class ScopedCi {
 public:
  explicit ScopedCi(const char* value) {
    const char* old = std::getenv("CI");
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr) {
      unsetenv("CI");
    } else {
      setenv("CI", value, 1);
    }
  }
  ~ScopedCi() {
    if (had_) {
      setenv("CI", old_.c_str(), 1);
    } else {
      unsetenv("CI");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

void SkipOrFail(bool* after) {
  LS_SKIP_OR_FAIL_UNLESS_CI("a test capability") << "detail";
  *after = true;  // never reached
}

TEST(CiSkipTest, FailsUnderCiNamingTheCapability) {
  ScopedCi ci("true");
  EXPECT_TRUE(RunningUnderCi());
  static bool after = false;  // EXPECT_FATAL_FAILURE's statement sees only statics
  EXPECT_FATAL_FAILURE(SkipOrFail(&after), "a test capability unavailable, and CI machines");
  EXPECT_FALSE(after);
}

TEST(CiSkipTest, OnlyTheExactValueTrueCountsAsCi) {
  {
    ScopedCi ci(nullptr);
    EXPECT_FALSE(RunningUnderCi());
    EXPECT_EQ(CiSkipResultType(), ::testing::TestPartResult::kSkip);
  }
  ScopedCi ci("1");
  EXPECT_FALSE(RunningUnderCi());
  EXPECT_NE(CiSkipMessage("x").find("skipped"), std::string::npos);
}

// Locally the helper records a skip (intercepted here, so this test itself passes) and
// returns before the rest of the function.
TEST(CiSkipTest, SkipsLocally) {
  ScopedCi ci(nullptr);
  bool after = false;
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    SkipOrFail(&after);
  }
  EXPECT_FALSE(after);
  ASSERT_EQ(results.size(), 1);
  EXPECT_EQ(results.GetTestPartResult(0).type(), ::testing::TestPartResult::kSkip);
  EXPECT_NE(std::string(results.GetTestPartResult(0).message()).find("a test capability"),
            std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace lockstep
