// Helpers shared by the multi-process tests: runfiles, per-test directories, files,
// running a program to completion with a bound, TLS material for an in-process coordinator
// (the multi-process ones get theirs from client::LocalCluster), the bundled digits job, and
// comparing checkpoints bit for bit.
#ifndef LOCKSTEP_TESTS_TEST_UTIL_H_
#define LOCKSTEP_TESTS_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/local_cluster.h"
#include "client/local_credentials.h"
#include "coordinator/grpc_server.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace testing {

// $TEST_SRCDIR/lockstep/<path>
std::string Runfile(const std::string& path);
// $TEST_TMPDIR/<name>, created.
std::string TmpDir(const std::string& name);
// The whole file ("" if it cannot be read).
std::string ReadFile(const std::string& path);

struct Result {
  int exit_code = -1;  // -1: did not exit by the limit, or was killed
  std::string output;  // stdout and stderr
  absl::Duration took;
};

// Runs a program to completion (at most `limit`, then it is killed), capturing its stdout
// and stderr in `log`.
Result RunTool(std::vector<std::string> argv, const std::string& log,
               std::vector<std::pair<std::string, std::string>> env = {},
               absl::Duration limit = absl::Seconds(30));

// Throwaway TLS material in TmpDir(name) (client::LocalCredentials), set into `options`:
// the coordinator's certificate and the tokens. The caller makes its clients from the
// returned credentials (Daemon("worker-0"), Operator(), Viewer()).
absl::StatusOr<client::LocalCredentials> SecureCoordinator(
    const std::string& name, coordinator::CoordinatorServerOptions* options);

// A local cluster of `workers` lockstepd from this test's runfiles, its work dir TmpDir(name).
client::LocalClusterOptions LocalClusterFor(const std::string& name, int workers);
// LocalClusterFor(<the test's name>, workers) with these heartbeats, each lockstepd with a
// TF_CONFIG naming its task (lockstepd i is worker/i).
client::LocalClusterOptions TestClusterOptions(int workers, absl::Duration heartbeat_interval,
                                               absl::Duration heartbeat_timeout);
// Runs the `lockstep` CLI with `args` against `cluster` (its address and credentials).
Result RunCli(const client::LocalCluster& cluster, std::vector<std::string> args,
              absl::Duration limit = absl::Seconds(30));

// The bundled digits job (examples/jobs/digits_mlp.json) with absolute data paths and its
// checkpoints and summaries under `dir` (dir/ckpt, dir/tb).
v1::JobSpec DigitsJob(const std::string& dir);
// DigitsJob(dir) for ten million steps (until the test cancels it), with no checkpoints
// or summaries.
v1::JobSpec EndlessJob(const std::string& dir);

// Variables and optimizer slots of two checkpoints, byte for byte (gtest failures naming
// the variable or slot that differs).
void ExpectBitwiseEqual(const v1::Checkpoint& a, const v1::Checkpoint& b);

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_TEST_UTIL_H_
