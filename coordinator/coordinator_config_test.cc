// ResolveCoordinatorConfig: one test per rule of coordinator_config.h, with a fake
// environment.
#include "coordinator/coordinator_config.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

CoordinatorEnvironment Env(std::map<std::string, std::string> vars) {
  CoordinatorEnvironment e;
  e.env = [vars](const char* name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
  e.uid = 1234;
  return e;
}

TEST(ResolveCoordinatorConfigTest, HostDefaultsToEveryInterface) {
  CoordinatorServerOptions o;
  o.host = "ignored";
  ASSERT_TRUE(ResolveCoordinatorConfig(DaemonFlags{}, Env({}), &o).ok());
  EXPECT_EQ(o.host, "0.0.0.0");
  DaemonFlags flags;
  flags.host = "127.0.0.1";
  ASSERT_TRUE(ResolveCoordinatorConfig(flags, Env({}), &o).ok());
  EXPECT_EQ(o.host, "127.0.0.1");
}

TEST(ResolveCoordinatorConfigTest, StateDirFromFlagElseXdgElseHomeElseTmp) {
  CoordinatorServerOptions o;
  DaemonFlags flags;
  flags.state_dir = "/srv/coord";
  ASSERT_TRUE(ResolveCoordinatorConfig(flags, Env({{"XDG_STATE_HOME", "/x"}}), &o).ok());
  EXPECT_EQ(o.state_dir, "/srv/coord");
  flags.state_dir = "";
  ASSERT_TRUE(
      ResolveCoordinatorConfig(flags, Env({{"XDG_STATE_HOME", "/x"}, {"HOME", "/h"}}), &o).ok());
  EXPECT_EQ(o.state_dir, "/x/lockstep");
  // A relative $XDG_STATE_HOME is ignored, as the XDG specification says.
  ASSERT_TRUE(
      ResolveCoordinatorConfig(flags, Env({{"XDG_STATE_HOME", "x"}, {"HOME", "/h"}}), &o).ok());
  EXPECT_EQ(o.state_dir, "/h/.local/state/lockstep");
  ASSERT_TRUE(ResolveCoordinatorConfig(flags, Env({{"HOME", "relative"}}), &o).ok());
  EXPECT_EQ(o.state_dir, "/tmp/lockstep-state-1234");
}

TEST(ResolveCoordinatorConfigTest, TlsFromTheDaemonFlags) {
  CoordinatorServerOptions o;
  DaemonFlags flags;
  flags.tls.ca_file = "/ca.crt";
  flags.tls.cert_file = "/c.crt";
  flags.tls.key_file = "/c.key";
  ASSERT_TRUE(ResolveCoordinatorConfig(flags, Env({}), &o).ok());
  EXPECT_FALSE(o.tls.insecure);
  EXPECT_EQ(o.tls.ca_file, "/ca.crt");
  EXPECT_EQ(o.tls.cert_file, "/c.crt");
  EXPECT_EQ(o.tls.key_file, "/c.key");
}

TEST(ResolveCoordinatorConfigTest, TaskLimitsAtLeastOne) {
  for (auto [index, per_identity] : {std::pair{0, 8}, std::pair{4096, 0}}) {
    CoordinatorServerOptions o;
    o.membership.max_task_index = index;
    o.membership.max_tasks_per_identity = per_identity;
    absl::Status s = ResolveCoordinatorConfig(DaemonFlags{}, Env({}), &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("--max_task_index"));
    EXPECT_THAT(s.message(), HasSubstr("--max_tasks_per_identity"));
  }
}

TEST(ResolveCoordinatorConfigTest, HeartbeatTimeoutLongerThanPositiveInterval) {
  const std::pair<absl::Duration, absl::Duration> bad[] = {
      {absl::Seconds(1), absl::Seconds(1)},      // timeout not longer
      {absl::ZeroDuration(), absl::Seconds(3)},  // interval not positive
  };
  for (const auto& [interval, timeout] : bad) {
    CoordinatorServerOptions o;
    o.membership.heartbeat_interval = interval;
    o.membership.heartbeat_timeout = timeout;
    absl::Status s = ResolveCoordinatorConfig(DaemonFlags{}, Env({}), &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("--heartbeat_timeout"));
    EXPECT_THAT(s.message(), HasSubstr("--heartbeat_interval"));
  }
  CoordinatorServerOptions o;
  o.membership.heartbeat_interval = absl::Seconds(1);
  o.membership.heartbeat_timeout = absl::Seconds(3);
  EXPECT_TRUE(ResolveCoordinatorConfig(DaemonFlags{}, Env({}), &o).ok());
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
