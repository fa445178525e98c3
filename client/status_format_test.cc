#include "client/status_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::GetClusterStatusResponse Sample() {
  v1::GetClusterStatusResponse s;
  s.set_coordinator_incarnation(0x1234567890abcdef);
  for (int i = 0; i < 2; ++i) {
    v1::TaskStatus* t = s.add_tasks();
    t->mutable_task()->set_type("worker");
    t->mutable_task()->set_index(i);
    t->set_address("127.0.0.1:5000" + std::to_string(i));
    t->set_state(i == 0 ? v1::ALIVE : v1::LOST);
    t->set_incarnation(0xfeedface00000000 + i);
    t->set_seconds_since_heartbeat(0.25 + 4 * i);
    v1::Device* d = t->add_devices();
    d->set_kind(v1::Device::CPU);
  }
  return s;
}

TEST(StatusFormatTest, TableHasOneRowPerTask) {
  std::string table = FormatStatusTable(Sample());
  EXPECT_THAT(table, HasSubstr("TASK"));
  EXPECT_THAT(table, HasSubstr("worker/0"));
  EXPECT_THAT(table, HasSubstr("feedface"));
  EXPECT_THAT(table, HasSubstr("LOST"));
  EXPECT_THAT(table, HasSubstr("4.2s ago"));
  EXPECT_THAT(table, HasSubstr("1xCPU"));
  EXPECT_THAT(table, HasSubstr("2 task(s): 1 ALIVE, 1 LOST"));
}

TEST(StatusFormatTest, GpusShowTheirModel) {
  v1::GetClusterStatusResponse s = Sample();
  const char* products[] = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3",
                            "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", ""};
  for (const char* product : products) {
    v1::Device* d = s.mutable_tasks(0)->add_devices();
    d->set_kind(v1::Device::GPU);
    d->set_product(product);
  }
  EXPECT_THAT(FormatStatusTable(s), HasSubstr("1xA100,1xCPU,1xGPU,1xGeForce-RTX-4090,2xH100"));
}

TEST(StatusFormatTest, TableSaysWhenTheClusterRunsInsecure) {
  v1::GetClusterStatusResponse status;
  EXPECT_THAT(FormatStatusTable(status), ::testing::Not(::testing::HasSubstr("insecure")));
  status.set_insecure(true);
  EXPECT_THAT(FormatStatusTable(status),
              ::testing::HasSubstr("WARNING: the cluster runs --insecure"));
}

TEST(StatusFormatTest, JsonIsTheProtoMapping) {
  auto json = FormatStatusJson(Sample());
  ASSERT_TRUE(json.ok());
  auto doc = nlohmann::json::parse(*json);
  ASSERT_EQ(doc["tasks"].size(), 2u);
  EXPECT_EQ(doc["tasks"][1]["state"], "LOST");
  EXPECT_EQ(doc["tasks"][0]["task"]["type"], "worker");
  // fixed64 is a decimal string in the proto3 JSON mapping.
  EXPECT_EQ(doc["coordinatorIncarnation"], std::to_string(0x1234567890abcdefULL));
  EXPECT_EQ(CountInState(Sample(), v1::ALIVE), 1);
}

TEST(StatusFormatTest, TableEndsWithTheJobsHangVerdicts) {
  v1::GetClusterStatusResponse status = Sample();
  EXPECT_THAT(FormatStatusTable(status), Not(HasSubstr("HANG")));
  v1::JobDiagnosis* d = status.add_diagnoses();
  d->set_job_id("job-000004");
  d->set_hang_verdict("all-reduce #7 (1 KiB): worker/0 waiting 2.0 s");
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("job-000004 HANG:      all-reduce #7 (1 KiB): worker/0 waiting 2.0 s"));
}

}  // namespace
}  // namespace client
}  // namespace lockstep
