// No GPU needed: how NCCL results become absl::Status, and what loading libnccl.so.2 says.
#include "collectives/nccl/real_nccl_api.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::HasSubstr;

TEST(NcclStatusTest, MapsResults) {
  EXPECT_TRUE(NcclStatus(ncclSuccess, "x", "", "").ok());
  EXPECT_TRUE(NcclStatus(ncclInProgress, "x", "", "").ok());
  absl::Status remote =
      NcclStatus(ncclRemoteError, "ncclAllReduce", "remote process exited", "peer 3 closed");
  EXPECT_EQ(remote.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(remote.message(), "ncclAllReduce: remote process exited: peer 3 closed");
  EXPECT_EQ(NcclStatus(ncclInvalidUsage, "x", "y", "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclStatus(ncclUnhandledCudaError, "x", "y", "").code(), absl::StatusCode::kInternal);
}

TEST(RealNcclApiTest, LoadsOrSaysWhatIsMissing) {
  absl::StatusOr<std::unique_ptr<RealNcclApi>> api = RealNcclApi::Load();
  if (api.ok()) {
    // NCCL is on the loader's path here: its symbols resolved, and a call that needs no GPU
    // (the bootstrap's unique id, NCCL_UNIQUE_ID_BYTES = 128) answers through them.
    absl::StatusOr<std::string> id = (*api)->GetUniqueId();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->size(), 128u);
    return;
  }
  EXPECT_EQ(api.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(api.status().message()), HasSubstr("libnccl.so.2 not found"));
  EXPECT_THAT(std::string(api.status().message()), HasSubstr("LD_LIBRARY_PATH"));
}

}  // namespace
}  // namespace lockstep::collectives::nccl
