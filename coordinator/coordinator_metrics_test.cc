#include "coordinator/coordinator_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/health_check.h"
#include "common/metrics.h"
#include "coordinator/grpc_server.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<CoordinatorServer> Serve(CoordinatorMetrics* metrics) {
  CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  o.tls.insecure = true;
  o.metrics = metrics;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Create(o);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(CoordinatorMetricsTest, TimesRpcsByMethodAndServesHealthOnItsPort) {
  MetricsRegistry registry;
  CoordinatorMetrics metrics(&registry);
  std::unique_ptr<CoordinatorServer> server = Serve(&metrics);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<HealthStatus> health = CheckHealth(server->local_address());
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
  EXPECT_EQ(CheckHealth(server->local_address(), "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_rpc_seconds_count{method=\"/"
                              "grpc.health.v1.Health/Check\"} 2"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_rpcs_total{code=\"OK\",method=\"/"
                              "grpc.health.v1.Health/Check\"} 1"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_rpcs_total{code=\"NOT_FOUND\",method=\"/"
                              "grpc.health.v1.Health/Check\"} 1"));
}

TEST(CoordinatorMetricsTest, TasksJobsAndHeartbeatAgesAtEveryScrape) {
  MetricsRegistry registry;
  CoordinatorMetrics metrics(&registry);
  std::unique_ptr<CoordinatorServer> server = Serve(&metrics);
  ASSERT_NE(server, nullptr);
  RegisterRequest r;
  r.task = TaskRef{"worker", 0};
  r.address = "127.0.0.1:30000";
  r.incarnation = 7;
  ASSERT_TRUE(server->membership()->Register(r).ok());
  std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_tasks{state=\"ALIVE\"} 1"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_tasks{state=\"LOST\"} 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_heartbeat_age_seconds{task=\"worker/0\"}"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_jobs{state=\"RUNNING\"} 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_job_restarts 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_draining_tasks 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_store_write_failures 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_coordinator_unsaved_jobs 0"));

  // A task that deregistered keeps its row (state DEREGISTERED); once the server is gone the
  // scrape reads nothing from it.
  ASSERT_TRUE(server->membership()->Deregister(TaskRef{"worker", 0}, 7).ok());
  EXPECT_THAT(registry.TextFormat(),
              HasSubstr("lockstep_coordinator_tasks{state=\"DEREGISTERED\"} 1"));
  server->Shutdown();
  server.reset();
  EXPECT_THAT(registry.TextFormat(), HasSubstr("lockstep_coordinator_tasks"));
}

TEST(CoordinatorMetricsTest, HeartbeatAgeOfAForgottenTaskIsRemoved) {
  MetricsRegistry registry;
  CoordinatorMetrics metrics(&registry);
  CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  o.tls.insecure = true;
  Membership a(o.membership, Clock::Real());
  Membership empty(o.membership, Clock::Real());
  RegisterRequest r;
  r.task = TaskRef{"worker", 3};
  r.address = "127.0.0.1:30003";
  r.incarnation = 9;
  ASSERT_TRUE(a.Register(r).ok());
  std::unique_ptr<CoordinatorServer> server = Serve(nullptr);
  ASSERT_NE(server, nullptr);
  metrics.Track(&a, server->jobs());
  EXPECT_THAT(registry.TextFormat(), HasSubstr("task=\"worker/3\""));
  metrics.Track(&empty, server->jobs());
  EXPECT_THAT(registry.TextFormat(), Not(HasSubstr("task=\"worker/3\"")));
  metrics.Track(nullptr, nullptr);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
