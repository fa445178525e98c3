// Multi-process: the daemons refuse private keys and tokens files that others can read
// (common/secret_file.h), and `lockstep local` keeps its own secrets private: its keys,
// tokens and client configs are 0600 in a 0700 directory, and no child it starts carries a
// token on its command line or in its environment, where other users (`ps`, /proc) could
// read it. Every child is reaped by the Subprocess and LocalCluster destructors, also when
// an assertion fails.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/local_cluster.h"
#include "client/local_credentials.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Polls `path` until it contains `text` or `limit` passes; the file's contents.
std::string WaitForText(const std::string& path, const std::string& text, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  std::string contents = ReadFile(path);
  while (contents.find(text) == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    contents = ReadFile(path);
  }
  return contents;
}

TEST(SecretFilesTest, TheCoordinatorRefusesAKeyOrTokensFileOthersCanRead) {
  const std::string dir = TmpDir("coordinator_refuses");
  auto credentials = client::LocalCredentials::Create(dir + "/tls");
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto run = [&](const std::string& name) {
    std::vector<std::string> argv = {Runfile("coordinator/lockstep-coordinator"),
                                     "--host=127.0.0.1", "--port=0", "--port_file=" + dir + "/port",
                                     "--state_dir=" + dir + "/state"};
    for (const std::string& f : credentials->CoordinatorFlags()) argv.push_back(f);
    return RunTool(argv, absl::StrCat(dir, "/", name, ".log"), {}, absl::Seconds(15));
  };
  const std::string key = dir + "/tls/coordinator.key";
  const std::string tokens = credentials->tokens_file();

  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  Result r = run("open_key");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // a bad configuration: systemd does not restart it
  EXPECT_THAT(r.output, HasSubstr("--tls_key: " + key + " is open to every user (mode 0644"));
  EXPECT_THAT(r.output, HasSubstr("chmod 600 " + key));
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);

  ASSERT_EQ(::chmod(tokens.c_str(), 0640), 0);
  if (::geteuid() == 0) {  // root's own file may be shared with its group: give it away
    ASSERT_EQ(::chown(tokens.c_str(), 65534, static_cast<gid_t>(-1)), 0);
  }
  r = run("open_tokens");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tokens_file: " + tokens + " is open to its group"));
  EXPECT_THAT(r.output, HasSubstr("chmod 600 " + tokens));
}

TEST(SecretFilesTest, AWorkerRefusesAKeyOthersCanReadAndStartsWithAPrivateOne) {
  client::LocalClusterOptions o = testing::LocalClusterFor("worker_refuses", 1);
  auto cluster = client::LocalCluster::StartCoordinator(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const client::LocalCredentials* credentials = (*cluster)->credentials();
  auto tls = credentials->Daemon("worker-0");
  ASSERT_TRUE(tls.ok()) << tls.status();

  ASSERT_EQ(::chmod(tls->key_file.c_str(), 0604), 0);
  ASSERT_TRUE((*cluster)->StartWorker(0).ok());
  absl::StatusOr<int> status = (*cluster)->worker(0)->Wait(absl::Now() + absl::Seconds(15));
  ASSERT_TRUE(status.ok()) << "lockstepd did not exit: " << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << DescribeWaitStatus(*status);
  const std::string log = ReadFile(o.work_dir + "/lockstepd.0.log");
  EXPECT_THAT(log, HasSubstr("--tls_key: " + tls->key_file + " is open to every user"));
  EXPECT_THAT(log, HasSubstr("chmod 600 " + tls->key_file));

  // The control: the same worker with its key private joins the cluster.
  ASSERT_EQ(::chmod(tls->key_file.c_str(), 0600), 0);
  ASSERT_TRUE((*cluster)->StartWorker(0).ok());
  auto alive = (*cluster)->WaitForAlive(1, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(alive.ok()) << alive.status();

  // A tokens file opened up later is refused at the reload; the tokens in use are kept.
  ASSERT_EQ(::chmod(credentials->tokens_file().c_str(), 0644), 0);
  (*cluster)->coordinator()->Signal(SIGHUP);
  EXPECT_THAT(
      WaitForText(o.work_dir + "/coordinator.log", "the tokens in use are kept", absl::Seconds(10)),
      HasSubstr("SIGHUP: --tokens_file: " + credentials->tokens_file() + " is open to every user"));
  EXPECT_TRUE((*cluster)->Status().ok());  // the operator's token still works
}

// The pids whose parent is `parent`.
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    // /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces: read after ')'.
    const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    if (fields.size() > 1 && std::atoi(fields[1].c_str()) == parent) children.push_back(pid);
  }
  ::closedir(proc);
  return children;
}

TEST(SecretFilesTest, LocalWritesItsSecretsPrivateAndPassesNoneOnACommandLine) {
  const std::string dir = TmpDir("local");
  SubprocessOptions sp;
  sp.argv = {Runfile("client/lockstep"),
             "local",
             "--workers=2",
             "--no_job",
             "--keep_running",
             "--coordinator_bin=" + Runfile("coordinator/lockstep-coordinator"),
             "--lockstepd_bin=" + Runfile("worker/lockstepd"),
             "--work_dir=" + dir};
  sp.log_file = dir + "/local.out";
  auto local = Subprocess::Start(sp);
  ASSERT_TRUE(local.ok()) << local.status();
  const std::string out = WaitForText(sp.log_file, "running; ", absl::Seconds(45));
  ASSERT_THAT(out, HasSubstr("running; ")) << out;
  ASSERT_THAT(out, HasSubstr("--config=" + dir + "/tls/client.config")) << out;

  const std::string tls = dir + "/tls";
  EXPECT_EQ(ModeOf(tls), 0700u);
  for (const char* f : {"tokens", "client.config", "operator.config", "viewer.config", "ca.key",
                        "coordinator.key", "worker-0.key", "worker-1.key"}) {
    EXPECT_EQ(ModeOf(absl::StrCat(tls, "/", f)), 0600u) << f;
  }
  // The tokens, as the coordinator reads them.
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(ReadFile(tls + "/tokens"), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() == 3 && f[0][0] != '#') tokens.push_back(f[0]);
  }
  ASSERT_EQ(tokens.size(), 2u) << ReadFile(tls + "/tokens");

  // The coordinator and both workers: their command lines and environments hold no token.
  const std::vector<pid_t> children = ChildrenOf((*local)->pid());
  EXPECT_EQ(children.size(), 3u);
  for (pid_t pid : children) {
    std::string cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    EXPECT_FALSE(cmdline.empty()) << pid;
    const std::string environ = ReadFile(absl::StrCat("/proc/", pid, "/environ"));
    for (const std::string& token : tokens) {
      EXPECT_THAT(cmdline, Not(HasSubstr(token))) << pid;
      EXPECT_THAT(environ, Not(HasSubstr(token))) << pid;
    }
  }
  // The client config it printed works, without a token on this command line either.
  Result status =
      RunTool({Runfile("client/lockstep"), "status", "--config=" + tls + "/client.config"},
              dir + "/status.out", {{"HOME", dir}});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("2 task(s): 2 ALIVE"));

  (*local)->Signal(SIGINT);
  absl::StatusOr<int> exit = (*local)->Wait(absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << DescribeWaitStatus(*exit);
}

}  // namespace
}  // namespace lockstep
