#include "worker/hostname_task.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

TEST(TaskFromHostnameTest, StatefulSetOrdinalIsTheWorkerIndex) {
  absl::StatusOr<TaskRef> task = TaskFromHostname("lockstep-worker-0");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->ToString(), "worker/0");
  task = TaskFromHostname("lockstep-gpu-worker-17");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->ToString(), "worker/17");
}

TEST(TaskFromHostnameTest, UsesTheFirstLabelOfAQualifiedName) {
  absl::StatusOr<TaskRef> task = TaskFromHostname("lockstep-worker-2.lockstep-worker.ml.svc");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->ToString(), "worker/2");
}

TEST(TaskFromHostnameTest, RefusesNamesWithoutAnOrdinal) {
  for (const char* name : {"", "host1", "lockstep-worker-", "lockstep-worker-x1", "a-1b",
                           "db.host-3", "w-12345678901"}) {
    absl::StatusOr<TaskRef> task = TaskFromHostname(name);
    ASSERT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument)
        << name << " gave " << (task.ok() ? task->ToString() : task.status().ToString());
    EXPECT_THAT(task.status().message(), HasSubstr("--task_index_from_hostname")) << name;
    EXPECT_THAT(task.status().message(), HasSubstr(absl::StrCat("\"", name, "\""))) << name;
  }
}

}  // namespace
}  // namespace lockstep::worker
