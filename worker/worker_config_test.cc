// ResolveWorkerConfig: one test per rule of worker_config.h, with a fake environment (no
// process environment, file or host name is read).
#include "worker/worker_config.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::HasSubstr;

constexpr char kTfConfig[] =
    R"({"cluster": {"worker": ["10.0.0.1:5000", "10.0.0.2:5000"]},
        "task": {"type": "worker", "index": 1}})";

struct FakeEnvironment {
  std::map<std::string, std::string> vars;
  std::map<std::string, std::string> files;
  std::string hostname = "host-a";

  WorkerEnvironment Get() const {
    WorkerEnvironment e;
    e.env = [this](const char* name) {
      auto it = vars.find(name);
      return it == vars.end() ? std::string() : it->second;
    };
    e.read_file = [this](const std::string& path) -> absl::StatusOr<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return absl::NotFoundError(path);
      return it->second;
    };
    e.hostname = hostname;
    return e;
  }
};

WorkerFlags Flags() {
  WorkerFlags f;
  f.coordinator = "10.0.0.9:7000";
  f.daemon.tls.insecure = true;
  return f;
}

TEST(ResolveWorkerConfigTest, DefaultsWithoutTfConfig) {
  FakeEnvironment env;
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(Flags(), env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->task.has_value());  // the coordinator assigns one
  EXPECT_EQ(c->coordinator, "10.0.0.9:7000");
  EXPECT_TRUE(c->reserve_port);
  EXPECT_EQ(c->reserve_on, "");           // every interface: the coordinator is remote
  EXPECT_EQ(c->reported_host, "host-a");  // under this machine's name
  EXPECT_EQ(ReservedAddress(*c, 4321), "host-a:4321");
  EXPECT_EQ(c->transport, collectives::TransportKind::kAuto);
  EXPECT_EQ(c->state_dir, "/var/lib/lockstepd");
  EXPECT_EQ(c->data_roots, std::vector<std::string>{"/var/lib/lockstepd/data"});
  EXPECT_EQ(c->output_roots, std::vector<std::string>{"/var/lib/lockstepd/output"});
  EXPECT_TRUE(c->data_roots_defaulted);
  EXPECT_TRUE(c->output_roots_defaulted);
  EXPECT_EQ(c->retained_checkpoint_copies, 2);
  EXPECT_EQ(c->preemption_grace, absl::Seconds(15));
  EXPECT_FALSE(c->test_hooks.has_value());
}

TEST(ResolveWorkerConfigTest, CoordinatorFromFlagElseEnvironmentElseError) {
  FakeEnvironment env;
  env.vars["LOCKSTEP_COORDINATOR"] = "coord:7000";
  EXPECT_EQ(ResolveWorkerConfig(Flags(), env.Get())->coordinator, "10.0.0.9:7000");
  WorkerFlags flags = Flags();
  flags.coordinator = "";
  EXPECT_EQ(ResolveWorkerConfig(flags, env.Get())->coordinator, "coord:7000");
  env.vars.clear();
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--coordinator"));
  EXPECT_THAT(c.status().message(), HasSubstr("LOCKSTEP_COORDINATOR"));
}

TEST(ResolveWorkerConfigTest, TfConfigFileBeatsEnvironment) {
  FakeEnvironment env;
  env.files["/etc/tf.json"] = kTfConfig;
  env.vars["TF_CONFIG"] =
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})";
  WorkerFlags flags = Flags();
  flags.tf_config = "/etc/tf.json";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->task.has_value());
  EXPECT_EQ(c->task->ToString(), "worker/1");
  EXPECT_EQ(c->address, "10.0.0.2:5000");
  EXPECT_FALSE(c->reserve_port);
  EXPECT_EQ(c->reported_host, "10.0.0.2");  // the data plane listens on TF_CONFIG's host

  flags.tf_config = "";
  c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task->ToString(), "worker/0");
  EXPECT_EQ(c->address, "a:1");
}

TEST(ResolveWorkerConfigTest, UnreadableOrBadTfConfigNamesItsSource) {
  FakeEnvironment env;
  WorkerFlags flags = Flags();
  flags.tf_config = "/missing.json";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("--tf_config: cannot read /missing.json"));

  env.vars["TF_CONFIG"] = "{not json";
  c = ResolveWorkerConfig(Flags(), env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("($TF_CONFIG)"));
}

TEST(ResolveWorkerConfigTest, AddressFlagBeatsTfConfigAndIsChecked) {
  FakeEnvironment env;
  env.vars["TF_CONFIG"] = kTfConfig;
  WorkerFlags flags = Flags();
  flags.address = "10.1.1.1:6000";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->address, "10.1.1.1:6000");
  EXPECT_EQ(c->task->ToString(), "worker/1");  // the task still comes from TF_CONFIG

  flags.address = "no-port";
  c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--address"));
}

TEST(ResolveWorkerConfigTest, LoopbackCoordinatorReservesOnLoopback) {
  FakeEnvironment env;
  for (const char* coordinator : {"127.0.0.1:7000", "localhost:7000", "[::1]:7000"}) {
    WorkerFlags flags = Flags();
    flags.coordinator = coordinator;
    absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->reserve_port) << coordinator;
    EXPECT_EQ(c->reserve_on, "127.0.0.1") << coordinator;
    EXPECT_EQ(c->reported_host, "127.0.0.1") << coordinator;
  }
}

TEST(ResolveWorkerConfigTest, HostFlagNamesTheReservedAddress) {
  FakeEnvironment env;
  WorkerFlags flags = Flags();
  flags.daemon.host = "node-7.example";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ReservedAddress(*c, 9), "node-7.example:9");
  // No host name known: loopback's address rather than an empty host.
  env.hostname = "";
  flags.daemon.host = "";
  c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c->reported_host, "127.0.0.1");
}

TEST(ResolveWorkerConfigTest, TaskFromHostnameOnlyWithoutTfConfig) {
  FakeEnvironment env;
  env.hostname = "lockstep-worker-3";
  WorkerFlags flags = Flags();
  flags.task_index_from_hostname = true;
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task->ToString(), "worker/3");

  env.hostname = "no-ordinal";
  c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--task_index_from_hostname"));

  env.hostname = "lockstep-worker-3";
  env.vars["TF_CONFIG"] = kTfConfig;
  c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("--task_index_from_hostname: not with a TF_CONFIG ($TF_CONFIG)"));
}

TEST(ResolveWorkerConfigTest, TransportIsOneOfThree) {
  FakeEnvironment env;
  WorkerFlags flags = Flags();
  for (auto [name, kind] : {std::pair{"auto", collectives::TransportKind::kAuto},
                            std::pair{"tcp", collectives::TransportKind::kTcp},
                            std::pair{"shm", collectives::TransportKind::kShm}}) {
    flags.transport = name;
    EXPECT_EQ(ResolveWorkerConfig(flags, env.Get())->transport, kind) << name;
  }
  flags.transport = "rdma";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("--transport: expected auto, tcp or shm, got 'rdma'"));
}

TEST(ResolveWorkerConfigTest, StateDirFromFlagElseSystemdElseDefault) {
  FakeEnvironment env;
  env.vars["STATE_DIRECTORY"] = "/var/lib/a:/var/lib/b";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(Flags(), env.Get());
  EXPECT_EQ(c->state_dir, "/var/lib/a");  // systemd's first directory
  EXPECT_EQ(c->data_roots, std::vector<std::string>{"/var/lib/a/data"});
  WorkerFlags flags = Flags();
  flags.daemon.state_dir = "/srv/w";
  flags.data_root = "/data1,/data2";
  flags.output_root = "/out";
  c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c->state_dir, "/srv/w");
  EXPECT_EQ(c->data_roots, (std::vector<std::string>{"/data1", "/data2"}));
  EXPECT_EQ(c->output_roots, std::vector<std::string>{"/out"});
  EXPECT_FALSE(c->data_roots_defaulted);
  EXPECT_FALSE(c->output_roots_defaulted);
}

TEST(ResolveWorkerConfigTest, NegativeRetainedCopiesNamesTheFlag) {
  FakeEnvironment env;
  WorkerFlags flags = Flags();
  flags.retained_checkpoint_copies = -1;
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--retained_checkpoint_copies=-1"));
  flags.retained_checkpoint_copies = 0;
  EXPECT_TRUE(ResolveWorkerConfig(flags, env.Get()).ok());
}

TEST(ResolveWorkerConfigTest, TestHooksFromEnvironment) {
  FakeEnvironment env;
  env.vars["LOCKSTEP_TEST_HOOKS"] = "bogus";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(Flags(), env.Get());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("LOCKSTEP_TEST_HOOKS"));
}

TEST(ResolveWorkerConfigTest, TlsFromTheDaemonFlagsPlusServerName) {
  FakeEnvironment env;
  WorkerFlags flags = Flags();
  flags.daemon.tls = TlsOptions{.ca_file = "/ca.crt", .cert_file = "/w.crt", .key_file = "/w.key"};
  flags.tls_server_name = "coord.example";
  absl::StatusOr<WorkerConfig> c = ResolveWorkerConfig(flags, env.Get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tls.insecure);
  EXPECT_EQ(c->tls.ca_file, "/ca.crt");
  EXPECT_EQ(c->tls.cert_file, "/w.crt");
  EXPECT_EQ(c->tls.key_file, "/w.key");
  EXPECT_EQ(c->tls.server_name, "coord.example");
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
