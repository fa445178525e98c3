// GetClusterStatus unary latency on loopback: a real lockstep-coordinator process with N
// lockstepd registered; this process makes `--calls` sequential calls through the same
// client the CLI uses and prints p50/p90/p99. Goal (issue 2): p50 <= 150 us; with TLS and
// a token (the default; --insecure for plaintext) p50 <= 200 us.
//
//   bazel build -c opt //bench:status_latency //coordinator:lockstep-coordinator \
//       //worker:lockstepd && bazel-bin/bench/status_latency --calls=10000 --workers=8
#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_cluster.h"
#include "client/status_format.h"
#include "common/process.h"

ABSL_FLAG(int, workers, 8, "lockstepd registered while measuring.");
ABSL_FLAG(int, calls, 10000, "Timed calls (after 1000 warm-up calls).");

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  const lockstep::client::LocalClusterOptions o =
      lockstep::bench::BenchClusterOptions(absl::GetFlag(FLAGS_workers));
  std::unique_ptr<lockstep::client::LocalCluster> cluster =
      lockstep::bench::StartBenchCoordinator(o);
  if (cluster == nullptr) return 1;
  if (absl::Status s = cluster->StartWorkers(); !s.ok()) {
    fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (auto s = cluster->WaitForAlive(o.workers, absl::Now() + absl::Seconds(30)); !s.ok()) {
    fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }
  lockstep::client::JobServiceClient* client = cluster->client();
  for (int i = 0; i < 1000; ++i) {
    if (!client->GetClusterStatus().ok()) return 1;
  }
  const int calls = absl::GetFlag(FLAGS_calls);
  std::vector<double> us;
  us.reserve(calls);
  int tasks = 0;
  for (int i = 0; i < calls; ++i) {
    absl::Time t0 = absl::Now();
    auto s = client->GetClusterStatus();
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
    if (!s.ok()) {
      fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    tasks = s->tasks_size();
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[static_cast<size_t>(p * (us.size() - 1))]; };
  printf(
      "GetClusterStatus (%s), %d tasks, %d calls: p50 %.1f us, p90 %.1f us, p99 %.1f us, "
      "max %.1f us\n",
      o.insecure ? "insecure" : "TLS", tasks, calls, pct(0.50), pct(0.90), pct(0.99), us.back());
  return 0;
}
