// A real gRPC coordinator and N worker agents on threads, in one process: membership,
// key-value rendezvous and barriers over the wire, with the production adapters.
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/job_service_client.h"
#include "client/status_format.h"
#include "common/cluster_proto.h"
#include "common/incarnation.h"
#include "coordinator/grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/agent.h"
#include "worker/coordinator_store.h"
#include "worker/grpc_worker_service_client.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using worker::Agent;

constexpr int kWorkers = 4;

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

class InProcessClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorServerOptions o;
    o.host = "127.0.0.1";
    o.membership.heartbeat_interval = absl::Milliseconds(50);
    o.membership.heartbeat_timeout = absl::Seconds(1);
    auto credentials = lockstep::testing::SecureCoordinator("tls", &o);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    auto server = coordinator::CoordinatorServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    viewer_ = std::move(
        client::JobServiceClient::Create(server_->local_address(), credentials->Viewer()).value());
    for (int i = 0; i < kWorkers; ++i) {
      auto tls = credentials->Daemon(absl::StrCat("worker-", i));
      ASSERT_TRUE(tls.ok()) << tls.status();
      clients_.push_back(std::move(
          worker::GrpcWorkerServiceClient::Create(server_->local_address(), *tls).value()));
      worker::AgentOptions a;  // dynamic registration
      a.address = absl::StrCat("127.0.0.1:", 30000 + i);
      a.incarnation = NewIncarnation();
      a.initial_backoff = absl::Milliseconds(5);
      agents_.push_back(std::make_unique<Agent>(a, clients_.back().get(), Clock::Real()));
    }
    for (auto& a : agents_) {
      threads_.emplace_back([agent = a.get()] { EXPECT_TRUE(agent->Run().ok()); });
    }
  }

  void TearDown() override {
    for (auto& a : agents_) a->Stop();
    for (auto& t : threads_) t.join();
    if (server_) server_->Shutdown();
  }

  int CountAlive() {
    auto status = viewer_->GetClusterStatus();
    return status.ok() ? client::CountInState(*status, v1::ALIVE) : -1;
  }

  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::unique_ptr<client::JobServiceClient> viewer_;  // status, as a viewer client
  std::vector<std::unique_ptr<worker::WorkerServiceClient>> clients_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::thread> threads_;
};

TEST_F(InProcessClusterTest, AgentsFormClusterWithDistinctTasks) {
  std::set<int> indexes;
  for (auto& a : agents_) {
    ASSERT_TRUE(a->WaitForState(Agent::State::kAlive, Soon()));
    indexes.insert(a->task()->index);
  }
  EXPECT_EQ(indexes, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(CountAlive(), kWorkers);
  // The cluster and task each worker got back make a valid group naming its own task.
  // (The cluster it lists is the one at its registration: those registered before it.)
  ASSERT_EQ(agents_.size(), static_cast<size_t>(kWorkers));
  for (int i = 0; i < kWorkers; ++i) {
    const v1::RegisterWorkerResponse r = agents_[i]->registration();
    auto tf = TfConfigFromProto(r.cluster(), r.task());
    ASSERT_TRUE(tf.ok()) << tf.status() << ": " << r.DebugString();
    EXPECT_EQ(tf->task(), *agents_[i]->task()) << r.DebugString();
    EXPECT_LT(tf->task_index(), tf->num_workers()) << r.DebugString();
    EXPECT_EQ(tf->address(), absl::StrCat("127.0.0.1:", 30000 + i)) << r.DebugString();
  }
  // Heartbeats keep them alive past two timeouts.
  absl::Time until = absl::Now() + absl::Milliseconds(2200);
  while (absl::Now() < until) {
    ASSERT_EQ(CountAlive(), kWorkers);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

TEST_F(InProcessClusterTest, StoppedAgentDeregisters) {
  for (auto& a : agents_) ASSERT_TRUE(a->WaitForState(Agent::State::kAlive, Soon()));
  agents_[0]->Stop();
  ASSERT_TRUE(agents_[0]->WaitForState(Agent::State::kStopped, Soon()));
  auto status = viewer_->GetClusterStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(client::CountInState(*status, v1::DEREGISTERED), 1);
  EXPECT_EQ(client::CountInState(*status, v1::ALIVE), kWorkers - 1);
}

TEST_F(InProcessClusterTest, StoreRendezvousOverGrpc) {
  std::vector<std::unique_ptr<worker::CoordinatorStore>> stores;
  for (auto& c : clients_) {
    stores.push_back(
        std::make_unique<worker::CoordinatorStore>(c.get(), "job-1/attempt-0", Clock::Real()));
  }
  // Every rank publishes its address and reads everyone's; readers may start first.
  std::vector<std::thread> ranks;
  std::vector<std::vector<std::string>> seen(kWorkers);
  for (int r = 0; r < kWorkers; ++r) {
    ranks.emplace_back([&, r] {
      if (r % 2 == 0) absl::SleepFor(absl::Milliseconds(20));  // publish late on purpose
      ASSERT_TRUE(stores[r]->Set(absl::StrCat("rank", r), absl::StrCat("addr", r)).ok());
      for (int p = 0; p < kWorkers; ++p) {
        auto v = stores[r]->Get(absl::StrCat("rank", p), Soon());
        ASSERT_TRUE(v.ok()) << v.status();
        seen[r].push_back(*v);
      }
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kWorkers));
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(seen[r], (std::vector<std::string>{"addr0", "addr1", "addr2", "addr3"}));
  }
  // Write-once, and a missing key times out naming the scoped key.
  EXPECT_TRUE(absl::IsAlreadyExists(stores[0]->Set("rank0", "again")));
  auto missing = stores[0]->Get("nobody", absl::Now() + absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("job-1/attempt-0/nobody"));
}

TEST_F(InProcessClusterTest, BarrierOverGrpcNamesMissingMember) {
  v1::BarrierRequest req;
  req.set_barrier_id("job-1/attempt-0/init");
  req.set_timeout_ms(5000);
  for (int i = 0; i < 3; ++i) req.add_members(absl::StrCat("worker/", i));
  std::vector<std::thread> ts;
  std::vector<absl::Status> results(3);
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&, i] {
      v1::BarrierRequest mine = req;
      mine.set_member(absl::StrCat("worker/", i));
      results[i] = clients_[i]->Barrier(mine);
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(results.size(), 3u);
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;

  req.set_barrier_id("job-1/attempt-0/second");
  req.set_member("worker/0");
  req.set_timeout_ms(100);
  absl::Status s = clients_[0]->Barrier(req);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing: worker/1, worker/2"));
}

TEST(InProcessErrorsTest, UnreachableCoordinatorIsUnavailable) {
  // A coordinator that has shut down: its port now refuses connections.
  coordinator::CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  auto credentials = lockstep::testing::SecureCoordinator("unreachable", &o);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto server = coordinator::CoordinatorServer::Create(o);
  ASSERT_TRUE(server.ok());
  std::string address = (*server)->local_address();
  (*server)->Shutdown();
  server->reset();
  auto jobs = client::JobServiceClient::Create(address, credentials->Viewer(), absl::Seconds(2));
  ASSERT_TRUE(jobs.ok());
  absl::Time start = absl::Now();
  auto status = (*jobs)->GetClusterStatus();
  EXPECT_TRUE(absl::IsUnavailable(status.status()) || absl::IsDeadlineExceeded(status.status()))
      << status.status();
  EXPECT_THAT(std::string(status.status().message()), HasSubstr("GetClusterStatus to coordinator"));
  EXPECT_THAT(std::string(status.status().message()), HasSubstr(address));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The worker's own client of the worker service says the same of its calls.
  auto daemon = worker::GrpcWorkerServiceClient::Create(
      address, credentials->Daemon("worker-0").value(), absl::Seconds(2));
  ASSERT_TRUE(daemon.ok());
  auto registered = (*daemon)->RegisterWorker(v1::RegisterWorkerRequest());
  EXPECT_TRUE(absl::IsUnavailable(registered.status()) ||
              absl::IsDeadlineExceeded(registered.status()))
      << registered.status();
  EXPECT_THAT(std::string(registered.status().message()),
              HasSubstr("RegisterWorker to coordinator " + address));
}

}  // namespace
}  // namespace lockstep
