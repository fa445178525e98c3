#include "common/status.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

int calls = 0;

absl::Status FailIf(bool fail) {
  ++calls;
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool fail) {
  ++calls;
  if (fail) return absl::NotFoundError("none");
  return std::make_unique<int>(42);
}

absl::Status UseReturnIfError(bool fail, bool* reached_end) {
  LS_RETURN_IF_ERROR(FailIf(fail));
  *reached_end = true;
  return absl::OkStatus();
}

absl::StatusOr<int> UseAssignOrReturn(bool fail) {
  LS_ASSIGN_OR_RETURN(std::unique_ptr<int> value, MakeInt(fail));  // move-only value
  LS_ASSIGN_OR_RETURN(auto second, MakeInt(false));                // twice on one scope
  return *value + *second;
}

TEST(StatusTest, ReturnIfErrorPropagatesOnceAndStops) {
  calls = 0;
  bool reached = false;
  absl::Status s = UseReturnIfError(true, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(reached);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(UseReturnIfError(false, &reached).ok());
  EXPECT_TRUE(reached);
}

TEST(StatusTest, AssignOrReturnMovesValueOrPropagates) {
  calls = 0;
  auto ok = UseAssignOrReturn(false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 84);
  EXPECT_EQ(calls, 2);
  auto bad = UseAssignOrReturn(true);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
}

TEST(StatusTest, AnnotateKeepsCodeAndPrefixes) {
  absl::Status s = Annotate(absl::UnavailableError("peer gone"), "rank 3");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "rank 3: peer gone");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

TEST(StatusTest, AnnotateKeepsPayloads) {
  absl::Status original = absl::UnavailableError("peer gone");
  original.SetPayload("type.example/a", absl::Cord("1"));
  original.SetPayload("type.example/b", absl::Cord("two"));
  absl::Status s = Annotate(Annotate(original, "inner"), "outer");
  EXPECT_EQ(s.message(), "outer: inner: peer gone");
  ASSERT_TRUE(s.GetPayload("type.example/a").has_value());
  EXPECT_EQ(std::string(*s.GetPayload("type.example/a")), "1");
  ASSERT_TRUE(s.GetPayload("type.example/b").has_value());
  EXPECT_EQ(std::string(*s.GetPayload("type.example/b")), "two");
}

}  // namespace
}  // namespace lockstep
