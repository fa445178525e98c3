#include "client/cli/command.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace cli {
namespace {

const std::vector<OptionSpec> kSpecs = {{"workers", "n"}, {"keep_running", "s", false}};

TEST(CommandArgsTest, ParsesBothForms) {
  auto a = CommandArgs::Parse({"--workers", "4", "--keep_running", "pos"}, kSpecs);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->GetInt("workers", 3), 4);
  EXPECT_TRUE(a->Has("keep_running"));
  EXPECT_EQ(a->positional(), std::vector<std::string>{"pos"});
  auto b = CommandArgs::Parse({"--workers=5"}, kSpecs);
  EXPECT_EQ(*b->GetInt("workers", 3), 5);
  EXPECT_EQ(*b->GetInt("absent", 3), 3);
}

TEST(CommandArgsTest, RefusesUnknownAndMalformed) {
  auto refused = [](const absl::Status& s, const std::string& words) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(words), absl::string_view::npos) << s << " lacks: " << words;
  };
  refused(CommandArgs::Parse({"--nope=1"}, kSpecs).status(), "unknown option --nope");
  refused(CommandArgs::Parse({"--workers"}, kSpecs).status(), "--workers needs a value");
  refused(CommandArgs::Parse({"--keep_running=yes"}, kSpecs).status(),
          "--keep_running takes no value");
  auto a = CommandArgs::Parse({"--workers=x"}, kSpecs);
  ASSERT_TRUE(a.ok());
  refused(a->GetInt("workers", 1).status(), "--workers: expected an integer, got \"x\"");
  refused(a->GetDuration("workers", absl::Seconds(1)).status(),
          "--workers: expected a duration such as 500ms or 3s, got \"x\"");
}

int Call(std::vector<std::string> args, const std::vector<Command>& commands) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return Dispatch(static_cast<int>(argv.size()), argv.data(), commands);
}

TEST(DispatchTest, RunsCommandAndRefusesUnknown) {
  int ran = 0;
  Command c;
  c.name = "hello";
  c.usage = "hello";
  c.summary = "says hello";
  c.options = kSpecs;
  c.run = [&](const CommandArgs& args, const CommandContext&) {
    ran = *args.GetInt("workers", 1);
    return 0;
  };
  EXPECT_EQ(Call({"lockstep", "hello", "--workers=7"}, {c}), kExitOk);
  EXPECT_EQ(ran, 7);
  EXPECT_EQ(Call({"lockstep", "bogus"}, {c}), kExitUsage);
  EXPECT_EQ(Call({"lockstep"}, {c}), kExitUsage);
  EXPECT_EQ(Call({"lockstep", "hello", "--bad"}, {c}), kExitUsage);
  EXPECT_EQ(Call({"lockstep", "help"}, {c}), kExitOk);
}

}  // namespace
}  // namespace cli
}  // namespace lockstep
