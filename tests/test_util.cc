#include "tests/test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/job_format.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

std::string Runfile(const std::string& path) {
  return absl::StrCat(getenv("TEST_SRCDIR"), "/lockstep/", path);
}

std::string TmpDir(const std::string& name) {
  std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result RunTool(std::vector<std::string> argv, const std::string& log,
               std::vector<std::pair<std::string, std::string>> env, absl::Duration limit) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.log_file = log;
  o.env = std::move(env);
  unlink(log.c_str());
  Result r;
  absl::Time start = absl::Now();
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    r.output = p.status().ToString();
    return r;
  }
  auto status = (*p)->Wait(absl::Now() + limit);
  r.took = absl::Now() - start;
  if (status.ok() && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
  r.output = ReadFile(log);
  return r;
}

absl::StatusOr<client::LocalCredentials> SecureCoordinator(
    const std::string& name, coordinator::CoordinatorServerOptions* options) {
  LS_ASSIGN_OR_RETURN(client::LocalCredentials credentials,
                      client::LocalCredentials::Create(TmpDir(name)));
  LS_ASSIGN_OR_RETURN(options->tls, credentials.Daemon("coordinator"));
  LS_ASSIGN_OR_RETURN(options->tokens, coordinator::TokenTable::Load(credentials.tokens_file()));
  return credentials;
}

client::LocalClusterOptions LocalClusterFor(const std::string& name, int workers) {
  client::LocalClusterOptions o;
  o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
  o.lockstepd_bin = Runfile("worker/lockstepd");
  o.workers = workers;
  o.work_dir = TmpDir(name);
  return o;
}

client::LocalClusterOptions TestClusterOptions(int workers, absl::Duration heartbeat_interval,
                                               absl::Duration heartbeat_timeout) {
  client::LocalClusterOptions o =
      LocalClusterFor(::testing::UnitTest::GetInstance()->current_test_info()->name(), workers);
  o.heartbeat_interval = heartbeat_interval;
  o.heartbeat_timeout = heartbeat_timeout;
  o.static_tf_config = true;
  return o;
}

Result RunCli(const client::LocalCluster& cluster, std::vector<std::string> args,
              absl::Duration limit) {
  std::vector<std::string> argv = {Runfile("client/lockstep")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--coordinator=" + cluster.coordinator_address());
  for (const std::string& f : cluster.cli_flags()) argv.push_back(f);
  return RunTool(argv, cluster.options().work_dir + "/cli.out", {}, limit);
}

v1::JobSpec DigitsJob(const std::string& dir) {
  auto spec = client::ReadJobSpecFile(Runfile("examples/jobs/digits_mlp.json"));
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->mutable_data()->mutable_train()->set_files(0, Runfile("examples/data/digits.csv.gz"));
  spec->mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec->mutable_summaries()->set_dir(dir + "/tb");
  return *spec;
}

v1::JobSpec EndlessJob(const std::string& dir) {
  v1::JobSpec spec = DigitsJob(dir);
  spec.set_epochs(0);
  spec.set_steps(10000000);
  spec.clear_checkpoint();
  spec.clear_summaries();
  return spec;
}

void ExpectBitwiseEqual(const v1::Checkpoint& a, const v1::Checkpoint& b) {
  ASSERT_EQ(a.global_step(), b.global_step());
  ASSERT_EQ(a.variables_size(), b.variables_size());
  for (int i = 0; i < a.variables_size(); ++i) {
    EXPECT_EQ(a.variables(i).SerializeAsString(), b.variables(i).SerializeAsString())
        << "variable " << a.variables(i).name();
  }
  ASSERT_EQ(a.optimizer_slots_size(), b.optimizer_slots_size());
  for (int i = 0; i < a.optimizer_slots_size(); ++i) {
    EXPECT_EQ(a.optimizer_slots(i).SerializeAsString(), b.optimizer_slots(i).SerializeAsString())
        << "slot " << a.optimizer_slots(i).name();
  }
}

}  // namespace testing
}  // namespace lockstep
