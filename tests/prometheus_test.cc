// Monitoring end to end: a real lockstep-coordinator and two lockstepd on loopback serving
// /metrics (--metrics_address) and the plaintext gRPC health service (--health_address), all
// on port 0, scraped by a real Prometheus server (Debian's `prometheus`, /usr/bin/prometheus;
// the test skips without it) with its storage in the test's directory. A job runs; the
// workers' step counter is then read back through Prometheus' HTTP query API. Every process
// is stopped and reaped by its Subprocess's destructor, also when an assertion fails.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/local_cluster.h"
#include "common/ci_skip.h"
#include "common/health_check.h"
#include "common/http_get.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using testing::DigitsJob;
using testing::ReadFile;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// The port in the first line of the log at `path` that holds `marker` followed by
// "127.0.0.1:PORT" (what a daemon started on port 0 logs), once it is there.
absl::StatusOr<int> WaitForLoggedPort(const std::string& path, const std::string& marker,
                                      absl::Time deadline) {
  const std::string prefix = marker + "127.0.0.1:";
  while (true) {
    const std::string log = ReadFile(path);
    if (size_t at = log.find(prefix); at != std::string::npos) {
      at += prefix.size();
      const size_t end = log.find_first_not_of("0123456789", at);
      int port = 0;
      if (absl::SimpleAtoi(log.substr(at, end - at), &port) && port > 0) return port;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(path, " never logged \"", prefix, "PORT\":\n", log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// Waits until `pred` holds or `deadline` passes.
template <typename F>
bool Eventually(F pred, absl::Time deadline) {
  while (!pred()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

std::string Local(int port) { return absl::StrCat("127.0.0.1:", port); }

// `text` for a URL's query string.
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TmpDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // Starts a daemon with metrics and health on port 0; returns the two ports in `ports`.
  std::unique_ptr<Subprocess> StartDaemon(const std::string& name, std::vector<std::string> argv,
                                          std::pair<int, int>* ports) {
    argv.push_back("--metrics_address=127.0.0.1:0");
    argv.push_back("--health_address=127.0.0.1:0");
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.log_file = absl::StrCat(dir_, "/", name, ".log");
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return nullptr;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    absl::StatusOr<int> metrics = WaitForLoggedPort(o.log_file, "serving /metrics on ", deadline);
    absl::StatusOr<int> health =
        WaitForLoggedPort(o.log_file, "serving grpc.health.v1.Health on ", deadline);
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_TRUE(health.ok()) << health.status();
    *ports = {metrics.value_or(0), health.value_or(0)};
    return *std::move(p);
  }

  // lockstep-coordinator (insecure, heartbeats every 150 ms), its port in dir_/port.
  std::unique_ptr<Subprocess> StartCoordinator(std::pair<int, int>* ports) {
    return StartDaemon(
        "coordinator",
        {Runfile("coordinator/lockstep-coordinator"), "--insecure", "--host=127.0.0.1", "--port=0",
         "--port_file=" + dir_ + "/port", "--state_dir=" + dir_ + "/state",
         "--heartbeat_interval=150ms", "--heartbeat_timeout=3s"},
        ports);
  }

  std::unique_ptr<Subprocess> StartWorker(int i, const std::string& coordinator,
                                          std::pair<int, int>* ports) {
    std::vector<std::string> argv = {Runfile("worker/lockstepd"), "--coordinator=" + coordinator,
                                     "--insecure",
                                     absl::StrCat("--state_dir=", dir_, "/worker-", i)};
    for (std::string& f : client::LocalRootFlags(dir_)) argv.push_back(std::move(f));
    return StartDaemon(absl::StrCat("worker-", i), argv, ports);
  }

  std::string dir_;
};

// Kubernetes' readiness: a worker that has not registered yet (its coordinator never
// answers) is NOT_SERVING on its health port, which serves in plaintext.
TEST_F(PrometheusTest, WorkerIsNotServingUntilRegistered) {
  // Listens but never answers: the worker stays REGISTERING.
  auto silent = ReservedPort::Create("127.0.0.1", 0);
  ASSERT_TRUE(silent.ok()) << silent.status();
  std::pair<int, int> ports;
  auto worker = StartWorker(0, Local((*silent)->port()), &ports);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<HealthStatus> health = CheckHealth(Local(ports.second));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kNotServing);
  // Its metrics are served from the start.
  absl::StatusOr<std::string> metrics = HttpGet("127.0.0.1", ports.first, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, ::testing::HasSubstr("lockstep_worker_steps_total 0"));
  EXPECT_EQ(worker->Stop(absl::Seconds(10)), 0);
}

// `lockstep drain` on an idle worker: its health port says NOT_SERVING (a load balancer or
// an operator's probe sees it leave) until the drain is undone.
TEST_F(PrometheusTest, ADrainedWorkerIsNotServingUntilTheDrainIsUndone) {
  std::pair<int, int> coordinator_ports;
  auto coordinator = StartCoordinator(&coordinator_ports);
  ASSERT_NE(coordinator, nullptr);
  absl::StatusOr<int> port = WaitForPortFile(dir_ + "/port", absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(port.ok()) << port.status();
  std::pair<int, int> ports;
  auto worker = StartWorker(0, Local(*port), &ports);
  ASSERT_NE(worker, nullptr);
  auto health_is = [&](HealthStatus want) {
    return Eventually(
        [&] { return CheckHealth(Local(ports.second)).value_or(HealthStatus::kUnknown) == want; },
        absl::Now() + absl::Seconds(20));
  };
  ASSERT_TRUE(health_is(HealthStatus::kServing));
  auto drain = [&](bool undo) {
    std::vector<std::string> argv = {Runfile("client/lockstep"), "drain", "worker/0",
                                     "--coordinator=" + Local(*port), "--insecure"};
    if (undo) argv.push_back("--undo");
    Result r = RunTool(argv, dir_ + "/cli.out");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  };
  drain(false);
  EXPECT_TRUE(health_is(HealthStatus::kNotServing)) << "still SERVING after lockstep drain";
  drain(true);
  EXPECT_TRUE(health_is(HealthStatus::kServing)) << "not SERVING after lockstep drain --undo";
  EXPECT_EQ(worker->Stop(absl::Seconds(10)), 0);
}

TEST_F(PrometheusTest, PrometheusScrapesACluster) {
  if (access(kPrometheus, X_OK) != 0) {
    LS_SKIP_OR_FAIL_UNLESS_CI("Prometheus")
        << kPrometheus << " is not installed (Debian package prometheus; "
        << "tools/bootstrap.sh installs it)";
  }
  std::pair<int, int> coordinator_ports;
  auto coordinator = StartCoordinator(&coordinator_ports);
  ASSERT_NE(coordinator, nullptr);
  absl::StatusOr<int> port = WaitForPortFile(dir_ + "/port", absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = Local(*port);
  const absl::Time ready_by = absl::Now() + absl::Seconds(30);
  EXPECT_TRUE(Eventually(
      [&] {
        return CheckHealth(Local(coordinator_ports.second)).value_or(HealthStatus::kUnknown) ==
               HealthStatus::kServing;
      },
      ready_by));

  std::vector<std::pair<int, int>> worker_ports(2);
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(StartWorker(i, address, &worker_ports[i]));
    ASSERT_NE(workers.back(), nullptr);
  }
  for (const auto& [metrics, health] : worker_ports) {
    EXPECT_TRUE(Eventually(
        [&, health = health] {
          return CheckHealth(Local(health)).value_or(HealthStatus::kUnknown) ==
                 HealthStatus::kServing;
        },
        ready_by))
        << "worker health port " << health << " never SERVING";
  }

  // Prometheus, scraping the three /metrics every 500 ms.
  std::vector<std::string> targets;
  targets.push_back(absl::StrCat("'", Local(coordinator_ports.first), "'"));
  for (const auto& [metrics, health] : worker_ports) {
    targets.push_back(absl::StrCat("'", Local(metrics), "'"));
  }
  const std::string config = dir_ + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 500ms\n  scrape_timeout: 450ms\n"
                        << "scrape_configs:\n  - job_name: lockstep\n    static_configs:\n"
                        << "      - targets: [" << absl::StrJoin(targets, ", ") << "]\n";
  SubprocessOptions po;
  po.argv = {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/tsdb",
             "--web.listen-address=127.0.0.1:0"};
  po.log_file = dir_ + "/prometheus.log";
  auto prometheus = Subprocess::Start(po);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  absl::StatusOr<int> web = WaitForLoggedPort(
      po.log_file, "msg=\"Listening on\" address=", absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(web.ok()) << web.status();

  // Every target scraped (up) before the job starts.
  std::string targets_answer;
  EXPECT_TRUE(Eventually(
      [&] {
        targets_answer = HttpGet("127.0.0.1", *web, "/api/v1/targets").value_or("");
        const nlohmann::json t = nlohmann::json::parse(targets_answer, nullptr, false);
        if (t.is_discarded() || t.value("status", "") != "success") return false;
        int up = 0;
        for (const nlohmann::json& target : t["data"]["activeTargets"]) {
          up += target.value("health", "") == "up" ? 1 : 0;
        }
        return up == 3;
      },
      absl::Now() + absl::Seconds(30)))
      << "Prometheus' targets: " << targets_answer;

  // A short two-worker job, with checkpoints.
  v1::JobSpec spec = DigitsJob(dir_ + "/job");
  spec.set_epochs(0);
  spec.set_steps(60);
  spec.set_num_workers(2);
  spec.mutable_checkpoint()->set_every_steps(20);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(spec, &json).ok());
  std::ofstream(dir_ + "/job.json") << json;
  Result submit = RunTool({Runfile("client/lockstep"), "submit", dir_ + "/job.json", "--watch",
                           "--coordinator=" + address, "--insecure"},
                          dir_ + "/cli.out", {}, absl::Seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;

  // The step counter, read back through Prometheus.
  double steps = 0;
  std::string last;
  const bool scraped = Eventually(
      [&] {
        absl::StatusOr<std::string> body =
            HttpGet("127.0.0.1", *web, "/api/v1/query?query=lockstep_worker_steps_total");
        if (!body.ok()) {
          last = body.status().ToString();
          return false;
        }
        last = *body;
        nlohmann::json answer = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
        if (answer.is_discarded() || answer.value("status", "") != "success") return false;
        for (const nlohmann::json& r : answer["data"]["result"]) {
          double v = 0;
          if (absl::SimpleAtod(r["value"][1].get<std::string>(), &v)) steps = std::max(steps, v);
        }
        return steps >= 60;
      },
      absl::Now() + absl::Seconds(60));
  EXPECT_TRUE(scraped) << "Prometheus never had lockstep_worker_steps_total >= 60; last answer: "
                       << last;
  EXPECT_EQ(steps, 60);

  // Every metric name Prometheus holds from Lockstep (printed for the record).
  absl::StatusOr<std::string> names = HttpGet("127.0.0.1", *web, "/api/v1/label/__name__/values");
  ASSERT_TRUE(names.ok()) << names.status();
  std::set<std::string> ours;
  const nlohmann::json all = nlohmann::json::parse(*names, nullptr, false);
  ASSERT_FALSE(all.is_discarded()) << *names;
  for (const nlohmann::json& n : all["data"]) {
    const std::string name = n.get<std::string>();
    if (name.rfind("lockstep_", 0) == 0) ours.insert(name);
  }
  std::cout << "lockstep metrics in Prometheus:\n  " << absl::StrJoin(ours, "\n  ") << "\n";
  for (const char* expected :
       {"lockstep_worker_steps_total", "lockstep_worker_examples_total",
        "lockstep_worker_examples_per_second", "lockstep_worker_step_seconds_bucket",
        "lockstep_worker_step_phase_seconds_bucket", "lockstep_worker_allreduce_bytes_total",
        "lockstep_worker_allreduce_busbw_bytes_per_second", "lockstep_worker_peer_sent_bytes_total",
        "lockstep_worker_peer_received_bytes_total",
        "lockstep_worker_checkpoint_write_seconds_bucket", "lockstep_worker_checkpoint_bytes_total",
        "lockstep_coordinator_tasks", "lockstep_coordinator_jobs",
        "lockstep_coordinator_job_restarts", "lockstep_coordinator_heartbeat_age_seconds",
        "lockstep_coordinator_rpc_seconds_bucket", "lockstep_coordinator_rpcs_total"}) {
    EXPECT_EQ(ours.count(expected), 1u) << expected;
  }

  // Every query of the shipped Grafana dashboard is valid PromQL and names only metrics
  // Prometheus holds.
  const nlohmann::json dashboard = nlohmann::json::parse(
      ReadFile(Runfile("deploy/grafana/lockstep-dashboard.json")), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());
  int queries = 0;
  for (const nlohmann::json& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const nlohmann::json& target : panel["targets"]) {
      const std::string expr = absl::StrReplaceAll(
          target["expr"].get<std::string>(), {{"$__rate_interval", "5s"}, {"$instance", ".*"}});
      absl::StatusOr<std::string> answer =
          HttpGet("127.0.0.1", *web, "/api/v1/query?query=" + UrlEncode(expr));
      EXPECT_TRUE(answer.ok()) << panel["title"] << ": " << expr << ": " << answer.status();
      ++queries;
      for (size_t at = expr.find("lockstep_"); at != std::string::npos;
           at = expr.find("lockstep_", at + 1)) {
        const size_t end = expr.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", at);
        const std::string name = expr.substr(at, end - at);
        EXPECT_EQ(ours.count(name), 1u) << panel["title"] << " queries " << name;
        at = end - 1;
      }
    }
  }
  EXPECT_GT(queries, 15);

  // Draining: a SIGTERM makes the worker leave cleanly (its health port with it).
  for (auto& w : workers) EXPECT_EQ(w->Stop(absl::Seconds(20)), 0);
  EXPECT_EQ(coordinator->Stop(absl::Seconds(20)), 0);
  (*prometheus)->Stop(absl::Seconds(10));
}

}  // namespace
}  // namespace lockstep
