#include "coordinator/job_store/job_store.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/job_store/job_store_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::lockstep::v1::JobProgress;
using ::lockstep::v1::JobRecord;
using ::lockstep::v1::JobState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TestDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(base != nullptr ? base : "/tmp", "/job_store_test_", info->name(), "_",
                      ::getpid());
}

class JobStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<JobStore> OpenStore() {
    absl::StatusOr<std::unique_ptr<JobStore>> store =
        JobStore::Open({.state_dir = dir_, .clock = &clock_});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string dir_ = TestDir();
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
};

TEST_F(JobStoreTest, CreateAssignsSortableIdsAndStartsPending) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<JobRecord> a = store->Create("digits", "spec-a");
  clock_.Advance(absl::Seconds(1));
  absl::StatusOr<JobRecord> b = store->Create("digits", "spec-b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id(), "job-000001");
  EXPECT_EQ(b->id(), "job-000002");
  EXPECT_EQ(a->state(), v1::PENDING);
  EXPECT_EQ(a->attempt(), 0);
  EXPECT_EQ(a->spec(), "spec-a");
  EXPECT_EQ(a->created_unix_micros(), 1800000000LL * 1000000);
  ASSERT_EQ(a->transitions_size(), 1);
  EXPECT_EQ(a->transitions(0).state(), v1::PENDING);

  absl::StatusOr<JobRecord> got = store->Get("job-000002");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->SerializeAsString(), b->SerializeAsString());

  absl::Status missing = store->Get("job-999999").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("job-999999"));
}

TEST_F(JobStoreTest, ListsNewestFirst) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store->Create(absl::StrCat("j", i), "").ok());
  absl::StatusOr<std::vector<JobRecord>> all = store->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id(), "job-000004");
  EXPECT_EQ((*all)[3].id(), "job-000001");
  absl::StatusOr<std::vector<JobRecord>> two = store->List(2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].id(), "job-000003");
}

TEST_F(JobStoreTest, FollowsTheStateMachineAndRecordsTransitions) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::string id = store->Create("j", "")->id();
  ASSERT_TRUE(store->UpdateState(id, v1::RUNNING, "scheduled on 2 workers").ok());
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(store->UpdateState(id, v1::PENDING, "restart: worker:1 lost").ok());
  absl::StatusOr<JobRecord> r = store->UpdateState(id, v1::RUNNING, "rescheduled");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->attempt(), 2);
  r = store->UpdateState(id, v1::FAILED, "worker:1 lost");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state(), v1::FAILED);
  EXPECT_EQ(r->reason(), "worker:1 lost");
  ASSERT_EQ(r->transitions_size(), 5);
  EXPECT_EQ(r->transitions(2).state(), v1::PENDING);
  EXPECT_EQ(r->transitions(2).unix_micros(), (1800000000LL + 5) * 1000000);
  EXPECT_EQ(r->transitions(2).reason(), "restart: worker:1 lost");
  EXPECT_EQ(r->transitions(4).attempt(), 2);

  absl::Status wrong = store->UpdateState(id, v1::RUNNING, "again").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.message(), HasSubstr(id));
  EXPECT_THAT(wrong.message(), HasSubstr("FAILED"));
  EXPECT_EQ(store->Get(id)->transitions_size(), 5);  // a refused transition changes nothing

  EXPECT_EQ(store->UpdateState("job-000042", v1::RUNNING, "").status().code(),
            absl::StatusCode::kNotFound);
}

// The transition table itself, and the store against every row: job_transitions_test.cc.

TEST_F(JobStoreTest, ProgressOnlyWhileRunning) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::string id = store->Create("j", "")->id();
  JobProgress p;
  p.set_step(10);
  p.set_loss(0.5);
  p.set_examples_per_sec(1234.5);
  p.set_busbw_gbps(2.25);
  EXPECT_EQ(store->UpdateProgress(id, p).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store->UpdateState(id, v1::RUNNING, "").ok());
  clock_.Advance(absl::Seconds(2));
  absl::StatusOr<JobRecord> r = store->UpdateProgress(id, p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->progress().step(), 10);
  EXPECT_DOUBLE_EQ(r->progress().busbw_gbps(), 2.25);
  EXPECT_EQ(r->progress().unix_micros(), (1800000000LL + 2) * 1000000);
  EXPECT_EQ(store->Get(id)->progress().examples_per_sec(), 1234.5);
}

TEST_F(JobStoreTest, EverythingSurvivesCloseAndReopen) {
  std::string spec(1000, '\x07');
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Create("first", spec).ok());
    ASSERT_TRUE(store->Create("second", "").ok());
    ASSERT_TRUE(store->UpdateState("job-000001", v1::RUNNING, "go").ok());
    JobProgress p;
    p.set_step(77);
    ASSERT_TRUE(store->UpdateProgress("job-000001", p).ok());
    ASSERT_TRUE(store->UpdateState("job-000002", v1::CANCELLED, "by user").ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRecord>> all = store->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].state(), v1::CANCELLED);
  EXPECT_EQ((*all)[1].state(), v1::RUNNING);
  EXPECT_EQ((*all)[1].spec(), spec);
  EXPECT_EQ((*all)[1].progress().step(), 77);
  // Ids keep counting from where they were.
  EXPECT_EQ(store->Create("third", "")->id(), "job-000003");
}

TEST_F(JobStoreTest, AcceptedJobSurvivesAProcessThatDiesWithoutClosing) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto store = JobStore::Open({.state_dir = dir_});
    if (!store.ok() || !(*store)->Create("durable", "spec").ok()) ::_exit(1);
    ::_exit(0);  // no destructor: the database is never closed
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "status " << wstatus;
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<JobRecord> r = store->Get("job-000001");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name(), "durable");
}

TEST_F(JobStoreTest, SecondOpenOfTheSameStateDirIsRefused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::Status second = JobStore::Open({.state_dir = dir_}).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.message(), HasSubstr("another"));
  EXPECT_THAT(second.message(), HasSubstr(dir_));
}

TEST_F(JobStoreTest, BadStateDirNamesTheFlag) {
  absl::Status status = JobStore::Open({.state_dir = dir_ + "/no/such/parent"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--state_dir"));
}

TEST_F(JobStoreTest, ConcurrentCreatesGetDistinctIds) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) EXPECT_TRUE(store->Create("c", "").ok());
    });
  }
  for (std::thread& th : threads) th.join();
  absl::StatusOr<std::vector<JobRecord>> all = store->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 40u);
  for (size_t i = 0; i < all->size(); ++i) {
    EXPECT_EQ((*all)[i].id(), absl::StrFormat("job-%06d", 40 - i));
  }
}

TEST_F(JobStoreTest, EndedJobsBeyondTheRetentionAreDeletedAndIdsNeverReused) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Create("j", "").ok());
  // job-000001..3 end, job-000004 runs, job-000005 is pending.
  for (const char* id : {"job-000001", "job-000002", "job-000003"}) {
    ASSERT_TRUE(store->UpdateState(id, v1::CANCELLED, "test").ok());
  }
  ASSERT_TRUE(store->UpdateState("job-000004", v1::RUNNING, "test").ok());
  absl::StatusOr<std::vector<std::string>> old = store->EndedBeyond(1);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(*old, ElementsAre("job-000001", "job-000002"));
  absl::Status running = store->Delete({"job-000004"});
  EXPECT_EQ(running.code(), absl::StatusCode::kFailedPrecondition) << running;
  ASSERT_TRUE(store->Delete(*old).ok());
  EXPECT_TRUE(absl::IsNotFound(store->Get("job-000001").status()));
  EXPECT_TRUE(store->Get("job-000004").ok());
  EXPECT_TRUE(store->EndedBeyond(1)->empty());
  EXPECT_EQ(store->List()->size(), 3u);
  EXPECT_EQ(store->Create("j", "")->id(), "job-000006");
}

// A record that does not parse (a torn write, a bad sector) costs its job only: the store
// opens, answers that job FAILED with a reason naming the store and the row, keeps every
// other job, and lets retention delete the row.
TEST_F(JobStoreTest, UnreadableRecordIsFailedAndTheRestServed) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Create("j", "spec").ok());
    ASSERT_TRUE(store->UpdateState("job-000002", v1::RUNNING, "go").ok());
  }
  ASSERT_TRUE(CorruptStoredRecord(dir_, "job-000002").ok());
  auto store = OpenStore();  // used to be DATA_LOSS: "stored record ... does not parse"
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRecord>> all = store->List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id(), "job-000003");
  EXPECT_EQ((*all)[0].state(), v1::PENDING);
  EXPECT_EQ((*all)[0].spec(), "spec");
  EXPECT_EQ((*all)[2].state(), v1::PENDING);
  const JobRecord& lost = (*all)[1];
  EXPECT_EQ(lost.id(), "job-000002");
  EXPECT_EQ(lost.state(), v1::FAILED);
  EXPECT_THAT(lost.reason(), HasSubstr("job store '" + dir_ + "/jobs.sqlite3'"));
  EXPECT_THAT(lost.reason(), HasSubstr("unreadable record for job job-000002 (row 2"));
  absl::StatusOr<JobRecord> got = store->Get("job-000002");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), v1::FAILED);
  EXPECT_EQ(got->reason(), lost.reason());
  // Ended: no transition out of it, and retention takes it like any ended job.
  EXPECT_EQ(store->UpdateState("job-000002", v1::SUCCEEDED, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::vector<std::string>> old = store->EndedBeyond(0);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(*old, ElementsAre("job-000002"));
  ASSERT_TRUE(store->Delete(*old).ok());
  EXPECT_EQ(store->List()->size(), 2u);
  EXPECT_TRUE(store->UpdateState("job-000001", v1::RUNNING, "go").ok());
}

// A row SQLite itself cannot read (the injected fault stands for a damaged page or a read
// error) costs its job only: the store opens, lists every job, answers that one FAILED with a
// reason naming the store, the row and SQLite's error, and serves the rest.
TEST_F(JobStoreTest, RowSqliteCannotReadIsFailedAndTheRestServed) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Create("j", "spec").ok());
    ASSERT_TRUE(store->UpdateState("job-000002", v1::CANCELLED, "test").ok());
    ASSERT_TRUE(store->UpdateState("job-000003", v1::CANCELLED, "test").ok());
  }
  int fault = SQLITE_CORRUPT;
  auto opened = JobStore::Open(
      {.state_dir = dir_, .clock = &clock_, .fail_read_for_test = [&fault](absl::string_view id) {
         return id == "job-000002" ? fault : SQLITE_OK;
       }});
  ASSERT_TRUE(opened.ok()) << opened.status();  // used to fail: List() failed as a whole
  JobStore& store = **opened;
  absl::StatusOr<std::vector<JobRecord>> all = store.List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].state(), v1::CANCELLED);
  EXPECT_EQ((*all)[2].state(), v1::PENDING);
  EXPECT_EQ((*all)[2].spec(), "spec");
  const JobRecord& lost = (*all)[1];
  EXPECT_EQ(lost.id(), "job-000002");
  EXPECT_EQ(lost.state(), v1::FAILED);
  EXPECT_THAT(lost.reason(), HasSubstr("job store '" + dir_ + "/jobs.sqlite3'"));
  EXPECT_THAT(lost.reason(), HasSubstr("unreadable record for job job-000002 (row 2"));
  EXPECT_THAT(lost.reason(), HasSubstr("database disk image is malformed (sqlite code 11)"));
  EXPECT_THAT(lost.reason(), HasSubstr(".recover"));
  fault = SQLITE_IOERR_READ;
  absl::StatusOr<JobRecord> got = store.Get("job-000002");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), v1::FAILED);
  EXPECT_THAT(got->reason(), HasSubstr("disk I/O error"));
  EXPECT_EQ(store.UpdateState("job-000002", v1::SUCCEEDED, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Retention cannot delete what SQLite cannot read: it takes the other ended jobs only.
  absl::StatusOr<std::vector<std::string>> old = store.EndedBeyond(0);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(*old, ElementsAre("job-000003"));
  ASSERT_TRUE(store.Delete(*old).ok());
  EXPECT_TRUE(store.UpdateState("job-000001", v1::RUNNING, "go").ok());
  EXPECT_EQ(store.Create("j", "")->id(), "job-000004");
  // Once the row reads again (a transient error), the job is what was stored.
  fault = SQLITE_OK;
  EXPECT_EQ(store.Get("job-000002")->state(), v1::CANCELLED);
}

// The same with a real damaged page: one overflow page of job-000002's 20 KB record points
// past the end of the file, so SQLite answers SQLITE_CORRUPT for that row and no other.
TEST_F(JobStoreTest, DamagedPageOfOneRecordCostsOnlyItsJob) {
  std::string big(20000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Create("small", "spec").ok());
    ASSERT_TRUE(store->Create("big", big).ok());
    ASSERT_TRUE(store->Create("small", "spec").ok());
    ASSERT_TRUE(store->UpdateState("job-000002", v1::CANCELLED, "test").ok());
  }
  absl::Status damaged = DamageStoredRecordPage(dir_, "job-000002");
  ASSERT_TRUE(damaged.ok()) << damaged;
  auto store = OpenStore();  // used to be DATA_LOSS from List(): the coordinator exited
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRecord>> all = store->List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].spec(), "spec");
  EXPECT_EQ((*all)[2].spec(), "spec");
  EXPECT_EQ((*all)[1].id(), "job-000002");
  EXPECT_EQ((*all)[1].state(), v1::FAILED);
  EXPECT_THAT((*all)[1].reason(), HasSubstr("job store '" + dir_ + "/jobs.sqlite3'"));
  EXPECT_THAT((*all)[1].reason(), HasSubstr("(row 2: SQLite cannot read it"));
  EXPECT_THAT((*all)[1].reason(), HasSubstr("(sqlite code 11)"));
  EXPECT_EQ(store->Get("job-000002")->state(), v1::FAILED);
  // The other rows, on the same leaf page, are read and written as ever.
  EXPECT_TRUE(store->UpdateState("job-000001", v1::RUNNING, "go").ok());
  EXPECT_TRUE(store->UpdateState("job-000003", v1::CANCELLED, "test").ok());
  // Its state column still reads (CANCELLED): retention offers it, but SQLite could not
  // delete it, so Delete leaves it and deletes the rest.
  absl::StatusOr<std::vector<std::string>> old = store->EndedBeyond(0);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(*old, ElementsAre("job-000002", "job-000003"));
  absl::Status deleted = store->Delete(*old);
  EXPECT_TRUE(absl::IsNotFound(store->Get("job-000003").status()));
  EXPECT_TRUE(absl::IsNotFound(store->Get("job-000003").status()));
  EXPECT_EQ(store->Get("job-000002")->state(), v1::FAILED);
  EXPECT_EQ(store->Create("j", "")->id(), "job-000004");
  EXPECT_EQ(store->Get("job-000001")->state(), v1::RUNNING);
}

// When not even the ids can be listed (the id index is damaged), Open fails with DATA_LOSS
// naming the file and the way to rebuild it.
TEST_F(JobStoreTest, StoreWhoseIdsCannotBeListedFailsOpenNamingRecover) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Create("j", "spec").ok());
  }
  absl::Status damaged = DamageIdIndex(dir_);
  ASSERT_TRUE(damaged.ok()) << damaged;
  absl::Status opened = JobStore::Open({.state_dir = dir_, .clock = &clock_}).status();
  EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss) << opened;
  EXPECT_THAT(opened.message(), HasSubstr("'" + dir_ + "/jobs.sqlite3' is damaged"));
  EXPECT_THAT(opened.message(), HasSubstr("malformed"));
  EXPECT_THAT(opened.message(), HasSubstr("sqlite3 " + dir_ + "/jobs.sqlite3 .recover"));
}

// A write that fails (the injected fault stands for a full disk) changes nothing, and
// StartAttempt moves a job to RUNNING together with its workers or not at all.
TEST_F(JobStoreTest, FailedWritesChangeNothing) {
  bool fail = false;
  auto opened = JobStore::Open(
      {.state_dir = dir_, .clock = &clock_, .fail_write_for_test = [&fail](absl::string_view) {
         return fail ? absl::ResourceExhaustedError("disk full") : absl::OkStatus();
       }});
  ASSERT_TRUE(opened.ok()) << opened.status();
  JobStore& store = **opened;
  ASSERT_TRUE(store.Create("j", "spec").ok());
  v1::AttemptWorkerRecord w;
  w.set_task_type("worker");
  w.set_task_index(3);
  fail = true;
  absl::Status created = store.Create("k", "spec").status();
  EXPECT_EQ(created.code(), absl::StatusCode::kResourceExhausted) << created;
  EXPECT_THAT(created.message(), HasSubstr("create a job: disk full"));
  absl::Status started = store.StartAttempt("job-000001", "go", {w}).status();
  EXPECT_EQ(started.code(), absl::StatusCode::kResourceExhausted) << started;
  EXPECT_THAT(started.message(), HasSubstr("update job job-000001: disk full"));
  EXPECT_EQ(store.Get("job-000001")->state(), v1::PENDING);
  EXPECT_EQ(store.Get("job-000001")->attempt(), 0);
  EXPECT_EQ(store.List()->size(), 1u);
  fail = false;
  absl::StatusOr<JobRecord> running = store.StartAttempt("job-000001", "go", {w});
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state(), v1::RUNNING);
  EXPECT_EQ(running->attempt(), 1);
  ASSERT_EQ(store.Get("job-000001")->attempt_workers_size(), 1);
  EXPECT_EQ(store.Get("job-000001")->attempt_workers(0).task_index(), 3);
  fail = true;
  const absl::Status updated = store.UpdateState("job-000001", v1::SUCCEEDED, "done").status();
  EXPECT_EQ(updated.code(), absl::StatusCode::kResourceExhausted) << updated;
  EXPECT_NE(updated.message().find("disk full"), std::string::npos) << updated;
  EXPECT_EQ(store.Get("job-000001")->state(), v1::RUNNING);
  EXPECT_EQ(store.Delete({"job-000001"}).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace lockstep
