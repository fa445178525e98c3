#include "worker/agent.h"

#include <atomic>
#include <thread>

#include "common/protocol_version.h"
#include "gtest/gtest.h"
#include "worker/fake_worker_service_client.h"

namespace lockstep {
namespace worker {
namespace {

using State = Agent::State;

AgentOptions Options(std::optional<TaskRef> task) {
  AgentOptions o;
  o.task = task;
  o.address = "127.0.0.1:5000";
  o.incarnation = 42;
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(4);
  return o;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Waits (bounded) for `pred`.
template <typename F>
bool Eventually(F pred) {
  absl::Time limit = Soon();
  while (!pred()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(AgentTest, RetriesUntilCoordinatorAnswersThenHeartbeatsAndDeregisters) {
  FakeWorkerServiceClient client;
  std::atomic<int> attempts{0};
  std::atomic<int32_t> version{-1};
  client.on_register =
      [&](const v1::RegisterWorkerRequest& req) -> absl::StatusOr<v1::RegisterWorkerResponse> {
    version = req.protocol_version();  // the coordinator takes only its own
    if (++attempts < 4) return absl::UnavailableError("coordinator not up yet");
    v1::RegisterWorkerResponse r;
    *r.mutable_task() = req.task();
    r.set_heartbeat_interval_ms(1);
    return r;
  };
  Agent agent(Options(TaskRef{"worker", 2}), &client, Clock::Real());
  absl::Status result;
  std::thread t([&] { result = agent.Run(); });
  ASSERT_TRUE(agent.WaitForState(State::kAlive, Soon()));
  EXPECT_EQ(attempts.load(), 4);
  EXPECT_EQ(version.load(), kProtocolVersion);
  ASSERT_TRUE(Eventually([&] { return client.calls("Heartbeat") >= 3; }));
  agent.Stop();
  t.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(agent.state(), State::kStopped);
  EXPECT_EQ(client.calls("Deregister"), 1);
  // It deregistered its own task, with its own incarnation.
  std::vector<v1::DeregisterRequest> deregisters = client.deregisters();
  ASSERT_EQ(deregisters.size(), 1u);
  EXPECT_EQ(deregisters[0].task().type(), "worker");
  EXPECT_EQ(deregisters[0].task().index(), 2);
  EXPECT_EQ(deregisters[0].incarnation(), 42u);
  // And every heartbeat named the same.
  std::vector<v1::HeartbeatRequest> beats = client.heartbeats();
  ASSERT_GE(beats.size(), 3u);
  for (const v1::HeartbeatRequest& beat : beats) {
    EXPECT_EQ(beat.task().index(), 2);
    EXPECT_EQ(beat.incarnation(), 42u);
  }
}

TEST(AgentTest, ReRegistersWhenToldLost) {
  FakeWorkerServiceClient client;
  std::atomic<int> beats{0};
  client.on_heartbeat = [&](const v1::HeartbeatRequest& req) {
    EXPECT_EQ(req.incarnation(), 42u);
    return ++beats == 2 ? absl::AbortedError("worker/0 was marked LOST") : absl::OkStatus();
  };
  Agent agent(Options(TaskRef{"worker", 0}), &client, Clock::Real());
  std::thread t([&] { agent.Run().IgnoreError(); });
  ASSERT_TRUE(Eventually([&] { return client.calls("RegisterWorker") >= 2; }));
  ASSERT_TRUE(agent.WaitForState(State::kAlive, Soon()));
  agent.Stop();
  t.join();
}

TEST(AgentTest, OnAliveFollowsEnteringAndLeavingAlive) {
  FakeWorkerServiceClient client;
  std::atomic<int> beats{0};
  client.on_heartbeat = [&](const v1::HeartbeatRequest&) {
    return ++beats == 2 ? absl::AbortedError("worker/0 was marked LOST") : absl::OkStatus();
  };
  absl::Mutex mu;
  std::vector<bool> calls;
  AgentOptions options = Options(TaskRef{"worker", 0});
  options.on_alive = [&](bool alive) {
    absl::MutexLock l(&mu);
    calls.push_back(alive);
  };
  Agent agent(options, &client, Clock::Real());
  std::thread t([&] { agent.Run().IgnoreError(); });
  // Alive, lost (re-registering), alive again.
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock l(&mu);
    return calls.size() >= 3;
  }));
  agent.Stop();
  t.join();
  absl::MutexLock l(&mu);
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(calls[0], true);
  EXPECT_EQ(calls[1], false);
  EXPECT_EQ(calls[2], true);
  EXPECT_EQ(calls.back(), false) << "stopping leaves ALIVE";
}

TEST(AgentTest, DynamicRegistrationKeepsAssignedTask) {
  FakeWorkerServiceClient client;
  std::vector<bool> had_task;
  absl::Mutex mu;
  client.on_register =
      [&](const v1::RegisterWorkerRequest& req) -> absl::StatusOr<v1::RegisterWorkerResponse> {
    {
      absl::MutexLock l(&mu);
      had_task.push_back(req.has_task());
    }
    v1::RegisterWorkerResponse r;
    r.mutable_task()->set_type("worker");
    r.mutable_task()->set_index(5);
    r.set_heartbeat_interval_ms(1);
    return r;
  };
  std::atomic<int> beats{0};
  client.on_heartbeat = [&](const v1::HeartbeatRequest&) {
    return ++beats == 1 ? absl::NotFoundError("coordinator restarted") : absl::OkStatus();
  };
  Agent agent(Options(std::nullopt), &client, Clock::Real());
  std::thread t([&] { agent.Run().IgnoreError(); });
  ASSERT_TRUE(Eventually([&] { return client.calls("RegisterWorker") >= 2; }));
  agent.Stop();
  t.join();
  EXPECT_EQ(agent.task(), (TaskRef{"worker", 5}));
  // Leaving, it deregisters the task the coordinator assigned, not the one it asked for.
  std::vector<v1::DeregisterRequest> deregisters = client.deregisters();
  ASSERT_EQ(deregisters.size(), 1u);
  EXPECT_EQ(deregisters[0].task().type(), "worker");
  EXPECT_EQ(deregisters[0].task().index(), 5);
  EXPECT_EQ(deregisters[0].incarnation(), 42u);
  absl::MutexLock l(&mu);
  ASSERT_GE(had_task.size(), 2u);
  EXPECT_FALSE(had_task[0]);  // first time: ask for a task
  EXPECT_TRUE(had_task[1]);   // afterwards: claim the one assigned
}

TEST(AgentTest, InvalidArgumentIsPermanent) {
  FakeWorkerServiceClient client;
  client.on_register =
      [](const v1::RegisterWorkerRequest&) -> absl::StatusOr<v1::RegisterWorkerResponse> {
    return absl::InvalidArgumentError("address: bad");
  };
  Agent agent(Options(TaskRef{"worker", 0}), &client, Clock::Real());
  absl::Status s = agent.Run();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(agent.state(), State::kFailed);
  EXPECT_EQ(client.calls("RegisterWorker"), 1);
}

TEST(AgentTest, StopWhileRegisteringDoesNotDeregister) {
  FakeWorkerServiceClient client;
  client.on_register =
      [](const v1::RegisterWorkerRequest&) -> absl::StatusOr<v1::RegisterWorkerResponse> {
    return absl::UnavailableError("down");
  };
  Agent agent(Options(TaskRef{"worker", 0}), &client, Clock::Real());
  std::thread t([&] { agent.Run().IgnoreError(); });
  ASSERT_TRUE(Eventually([&] { return client.calls("RegisterWorker") >= 2; }));
  agent.Stop();
  t.join();
  EXPECT_EQ(agent.state(), State::kStopped);
  EXPECT_EQ(client.calls("Deregister"), 0);
  EXPECT_TRUE(client.deregisters().empty());
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
