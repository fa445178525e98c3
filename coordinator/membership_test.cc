#include "coordinator/membership.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest() : members_(MembershipOptions{absl::Seconds(1), absl::Seconds(3)}, &clock_) {}

  absl::StatusOr<Registration> Register(std::optional<TaskRef> task, uint64_t inc,
                                        std::string address) {
    RegisterRequest r;
    r.task = task;
    r.incarnation = inc;
    r.address = address;
    return members_.Register(r);
  }

  v1::TaskState StateOf(const TaskRef& t) {
    for (const v1::TaskStatus& s : members_.Snapshot()) {
      if (s.task().type() == t.type && s.task().index() == t.index) return s.state();
    }
    return v1::TASK_STATE_UNSPECIFIED;
  }

  FakeClock clock_;
  Membership members_;
};

const TaskRef kW0{"worker", 0};
const TaskRef kW1{"worker", 1};

TEST_F(MembershipTest, StaticRegistrationAndStatus) {
  auto r = Register(kW1, 11, "h:1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->task, kW1);
  EXPECT_EQ(StateOf(kW1), v1::ALIVE);
  // Worker 0 is missing: the cluster has a gap (an empty address at index 0).
  EXPECT_EQ(r->cluster.at("worker"), (std::vector<std::string>{"", "h:1"}));
}

// Only a worker of this coordinator's protocol version registers; another version, or none
// (a worker from before the field: 0), is refused naming both, and nothing is held.
TEST_F(MembershipTest, OnlyWorkersOfThisProtocolVersionRegister) {
  for (const int32_t version : {0, kProtocolVersion + 1}) {
    RegisterRequest r;
    r.task = kW0;
    r.incarnation = 7;
    r.address = "h:1";
    r.identity = "node-a";
    r.protocol_version = version;
    absl::Status refused = members_.Register(r).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_THAT(refused.message(), HasSubstr("worker/0 at h:1 (node-a)"));
    EXPECT_THAT(refused.message(), HasSubstr(absl::StrCat("protocol version ", version)));
    EXPECT_THAT(refused.message(), HasSubstr(absl::StrCat("speaks version ", kProtocolVersion)));
    EXPECT_EQ(StateOf(kW0), v1::TASK_STATE_UNSPECIFIED);
  }
  RegisterRequest same;
  same.incarnation = 7;
  same.address = "h:1";
  same.protocol_version = kProtocolVersion;
  absl::StatusOr<Registration> r = members_.Register(same);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StateOf(r->task), v1::ALIVE);
}

TEST_F(MembershipTest, DynamicRegistrationAssignsIndexesInOrder) {
  auto a = Register(std::nullopt, 1, "h:1");
  auto b = Register(std::nullopt, 2, "h:2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->task, kW0);
  EXPECT_EQ(b->task, kW1);
  EXPECT_EQ(b->cluster.at("worker"), (std::vector<std::string>{"h:1", "h:2"}));
  // A retried registration (same incarnation) gets the same task back.
  auto again = Register(std::nullopt, 2, "h:2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->task, kW1);
}

TEST_F(MembershipTest, DeregisteredIndexIsReused) {
  ASSERT_TRUE(Register(std::nullopt, 1, "h:1").ok());
  ASSERT_TRUE(Register(std::nullopt, 2, "h:2").ok());
  ASSERT_TRUE(members_.Deregister(kW0, 1).ok());
  auto c = Register(std::nullopt, 3, "h:3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->task, kW0);
  EXPECT_EQ(c->replaced_incarnation, 1u);
}

TEST_F(MembershipTest, SameIncarnationReRegisterIsIdempotent) {
  ASSERT_TRUE(Register(kW0, 7, "h:1").ok());
  auto again = Register(kW0, 7, "h:1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->replaced_incarnation, 0u);
  EXPECT_EQ(members_.Snapshot().size(), 1u);
}

TEST_F(MembershipTest, SecondLiveClaimantIsRefusedNamingHolder) {
  ASSERT_TRUE(Register(kW0, 0xabcdef0123456789, "h:1").ok());
  auto second = Register(kW0, 0x1111111111111111, "h:1");
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("abcdef01"));
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("worker/0"));
}

TEST_F(MembershipTest, NewIncarnationReplacesLostHolder) {
  ASSERT_TRUE(Register(kW0, 5, "h:1").ok());
  clock_.Advance(absl::Seconds(4));
  EXPECT_EQ(StateOf(kW0), v1::LOST);
  auto r = Register(kW0, 6, "h:1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->replaced_incarnation, 5u);
  EXPECT_EQ(StateOf(kW0), v1::ALIVE);
  // The old process is told it was replaced.
  EXPECT_TRUE(absl::IsAborted(members_.Heartbeat(kW0, 5)));
}

TEST_F(MembershipTest, AddressUsedByAnotherLiveTaskIsRefused) {
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  auto r = Register(kW1, 2, "h:1");
  EXPECT_TRUE(absl::IsAlreadyExists(r.status()));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("worker/0"));
}

TEST_F(MembershipTest, InvalidRequests) {
  EXPECT_TRUE(absl::IsInvalidArgument(Register(kW0, 0, "h:1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Register(kW0, 1, "nohost").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Register(TaskRef{"master", 0}, 1, "h:1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Register(TaskRef{"worker", -1}, 1, "h:1").status()));
}

// A process shutting down says so in its heartbeats: its task counts as draining (nothing
// new is scheduled on it) until another process registers it.
TEST_F(MembershipTest, ALeavingProcessDrainsItsTaskUntilANewOneRegisters) {
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  ASSERT_TRUE(members_.Heartbeat(kW0, 1, /*leaving=*/true).ok());
  ASSERT_TRUE(members_.Heartbeat(kW0, 1).ok());  // stays leaving
  std::vector<v1::TaskStatus> tasks = members_.Snapshot();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].draining());
  ASSERT_TRUE(members_.Deregister(kW0, 1).ok());
  ASSERT_TRUE(Register(kW0, 2, "h:1").ok());
  EXPECT_FALSE(members_.Snapshot()[0].draining());
}

TEST_F(MembershipTest, HeartbeatKeepsAliveAndSilenceLoses) {
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(members_.Heartbeat(kW0, 1).ok());
  }
  EXPECT_EQ(StateOf(kW0), v1::ALIVE);
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(StateOf(kW0), v1::ALIVE);  // exactly at the timeout: still alive
  clock_.Advance(absl::Milliseconds(1));
  std::vector<v1::TaskStatus> lost = members_.Sweep();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].incarnation(), 1u);
  EXPECT_TRUE(members_.Sweep().empty());  // reported once
  absl::Status hb = members_.Heartbeat(kW0, 1);
  EXPECT_TRUE(absl::IsAborted(hb));
  EXPECT_THAT(std::string(hb.message()), HasSubstr("re-register"));
  // Same incarnation re-registers: ALIVE again.
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  EXPECT_EQ(StateOf(kW0), v1::ALIVE);
  EXPECT_TRUE(members_.Heartbeat(kW0, 1).ok());
}

TEST_F(MembershipTest, LostDetectedOnHeartbeatWithoutSweep) {
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  clock_.Advance(absl::Seconds(5));
  EXPECT_TRUE(absl::IsAborted(members_.Heartbeat(kW0, 1)));
}

TEST_F(MembershipTest, UnknownTaskHeartbeatIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(members_.Heartbeat(kW0, 1)));
  EXPECT_TRUE(absl::IsNotFound(members_.Deregister(kW0, 1)));
}

TEST_F(MembershipTest, DeregisterMarksAndChecksIncarnation) {
  ASSERT_TRUE(Register(kW0, 1, "h:1").ok());
  EXPECT_TRUE(absl::IsAborted(members_.Deregister(kW0, 2)));
  ASSERT_TRUE(members_.Deregister(kW0, 1).ok());
  EXPECT_EQ(StateOf(kW0), v1::DEREGISTERED);
  EXPECT_TRUE(absl::IsAborted(members_.Heartbeat(kW0, 1)));
  // A deregistered task is free: a new process takes it at once.
  EXPECT_TRUE(Register(kW0, 2, "h:1").ok());
}

TEST_F(MembershipTest, LostTaskKeepsItsIndexForDynamicRegistration) {
  ASSERT_TRUE(Register(std::nullopt, 1, "h:1").ok());
  clock_.Advance(absl::Seconds(4));
  auto r = Register(std::nullopt, 2, "h:2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->task, kW1);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep

namespace lockstep {
namespace coordinator {
namespace {

TEST(MembershipIdentityTest, OnlyTheRegisteringIdentityHoldsItsTask) {
  FakeClock clock;
  Membership members(MembershipOptions{absl::Seconds(1), absl::Seconds(3)}, &clock);
  RegisterRequest r;
  r.task = TaskRef{"worker", 0};
  r.incarnation = 7;
  r.address = "h:1";
  r.identity = "host-a";
  ASSERT_TRUE(members.Register(r).ok());
  const TaskRef w0{"worker", 0};
  EXPECT_TRUE(members.CheckHolder(w0, "host-a", "heartbeat").ok());
  absl::Status s = members.CheckHolder(w0, "host-b", "heartbeat");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("task worker/0 is held by identity \"host-a\""));
  EXPECT_THAT(s.message(), HasSubstr("\"host-b\" may not heartbeat"));
  // Unknown tasks and calls without identities (--insecure) are left to the call itself.
  EXPECT_TRUE(members.CheckHolder(TaskRef{"worker", 5}, "host-b", "heartbeat").ok());
  EXPECT_TRUE(members.CheckHolder(w0, "", "heartbeat").ok());

  // The same incarnation under another identity is not a retry.
  r.identity = "host-b";
  auto again = members.Register(r);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kPermissionDenied);
  // Nor is a dynamic registration: host-b gets a task of its own.
  r.task.reset();
  auto dynamic = members.Register(RegisterRequest{std::nullopt, "h:2", {}, 7, "host-b"});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_EQ(dynamic->task.index, 1);
}

// Registrations under certificate identities (the gRPC adapter passes the CN).
class MembershipBindingTest : public ::testing::Test {
 protected:
  explicit MembershipBindingTest(int max_tasks_per_identity = 8)
      : members_(
            MembershipOptions{absl::Seconds(1), absl::Seconds(3), 4096, max_tasks_per_identity},
            &clock_) {}

  absl::StatusOr<Registration> Register(std::optional<TaskRef> task, uint64_t inc,
                                        const std::string& address, const std::string& identity) {
    return members_.Register(RegisterRequest{task, address, {}, inc, identity});
  }

  FakeClock clock_;
  Membership members_;
};

TEST_F(MembershipBindingTest, AnIndexPastTheLimitIsRefusedAndChangesNothing) {
  auto huge = Register(TaskRef{"ps", 2147483647}, 1, "h:1", "attacker");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_THAT(huge.status().message(), HasSubstr("--max_task_index"));
  EXPECT_THAT(huge.status().message(), HasSubstr("2147483647"));
  auto edge = Register(TaskRef{"worker", 4096}, 2, "h:2", "attacker");
  EXPECT_EQ(edge.status().code(), absl::StatusCode::kResourceExhausted) << edge.status();
  EXPECT_TRUE(members_.Snapshot().empty());
  // The table is untouched: later registrations work.
  auto ordinary = Register(TaskRef{"worker", 5}, 3, "h:3", "host5");
  ASSERT_TRUE(ordinary.ok()) << ordinary.status();
  EXPECT_EQ(members_.Cluster().at("worker").size(), 6u);
  EXPECT_TRUE(Register(TaskRef{"worker", 4095}, 4, "h:4", "host6").ok());
}

TEST_F(MembershipBindingTest, ALostTaskStaysBoundToItsIdentity) {
  ASSERT_TRUE(Register(kW1, 1, "h:1", "host1").ok());
  clock_.Advance(absl::Seconds(4));  // LOST
  auto taken = Register(kW1, 2, "h:9", "host0");
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kPermissionDenied) << taken.status();
  EXPECT_THAT(taken.status().message(), HasSubstr("worker/1 is bound to identity \"host1\""));
  EXPECT_THAT(taken.status().message(), HasSubstr("lockstep release worker/1"));
  EXPECT_THAT(taken.status().message(), Not(HasSubstr("h:1")));  // nothing of the holder's
  // Also while it is ALIVE, and also for the holder's own incarnation.
  ASSERT_TRUE(Register(kW1, 3, "h:1", "host1").ok());  // host1 restarted: its task back
  EXPECT_EQ(Register(kW1, 3, "h:9", "host0").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(members_.IdentityOf(kW1), "host1");
  // A clean deregistration releases it.
  ASSERT_TRUE(members_.Deregister(kW1, 3).ok());
  auto after = Register(kW1, 4, "h:9", "host0");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(members_.IdentityOf(kW1), "host0");
}

TEST_F(MembershipBindingTest, AnOperatorReleasesALostTask) {
  EXPECT_EQ(members_.Release(kW1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Register(kW1, 1, "h:1", "host1").ok());
  absl::StatusOr<v1::TaskStatus> alive = members_.Release(kW1);
  EXPECT_EQ(alive.status().code(), absl::StatusCode::kFailedPrecondition) << alive.status();
  EXPECT_THAT(alive.status().message(), HasSubstr("worker/1 is ALIVE"));
  clock_.Advance(absl::Seconds(4));
  ASSERT_EQ(Register(kW1, 2, "h:9", "host0").status().code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::TaskStatus> released = members_.Release(kW1);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->state(), v1::DEREGISTERED);
  auto r = Register(kW1, 2, "h:9", "host0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->replaced_incarnation, 1u);
  // The old holder, back, is now the stranger.
  EXPECT_EQ(Register(kW1, 1, "h:1", "host1").status().code(), absl::StatusCode::kPermissionDenied);
}

class SmallIdentityLimitTest : public MembershipBindingTest {
 protected:
  SmallIdentityLimitTest() : MembershipBindingTest(/*max_tasks_per_identity=*/2) {}
};

TEST_F(SmallIdentityLimitTest, OneIdentityHoldsAtMostTheLimit) {
  ASSERT_TRUE(Register(std::nullopt, 1, "h:1", "greedy").ok());
  ASSERT_TRUE(Register(TaskRef{"ps", 0}, 2, "h:2", "greedy").ok());
  auto third = Register(std::nullopt, 3, "h:3", "greedy");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("--max_tasks_per_identity (2)"));
  EXPECT_THAT(third.status().message(), HasSubstr("\"greedy\" already holds 2"));
  EXPECT_EQ(Register(TaskRef{"worker", 9}, 4, "h:4", "greedy").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(members_.Snapshot().size(), 2u);
  // LOST tasks stay bound and count; a restarted process takes its own back.
  clock_.Advance(absl::Seconds(4));
  auto back = Register(std::nullopt, 5, "h:1", "greedy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->task, kW0);
  EXPECT_EQ(back->replaced_incarnation, 1u);
  // Other identities are not affected; a deregistered task no longer counts.
  EXPECT_TRUE(Register(std::nullopt, 6, "h:6", "modest").ok());
  ASSERT_TRUE(members_.Deregister(TaskRef{"ps", 0}, 2).ok());
  EXPECT_TRUE(Register(TaskRef{"worker", 9}, 7, "h:4", "greedy").ok());
}

TEST_F(MembershipBindingTest, AnotherIdentitySquattingAnAddressCannotKeepItsOwnerOut) {
  ASSERT_TRUE(Register(TaskRef{"worker", 7}, 1, "victim:7000", "attacker").ok());
  auto victim = Register(kW1, 2, "victim:7000", "victim");
  ASSERT_TRUE(victim.ok()) << victim.status();
  EXPECT_THAT(victim->address_shared_with, ::testing::ElementsAre(TaskRef{"worker", 7}));
  // One identity's own tasks still never share an address.
  auto twice = Register(kW0, 3, "victim:7000", "victim");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists) << twice.status();
  EXPECT_THAT(twice.status().message(), HasSubstr("already used by worker/1"));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
