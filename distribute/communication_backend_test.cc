// The one decision of communication.implementation, walked row by row: (replica kind,
// implementation, build has CUDA) -> backend or error; and distribute/devices.cc's
// CheckBackend agrees with it for the strategies' resolved devices.
#include "distribute/communication_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "distribute/devices.h"

namespace lockstep::distribute {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Row {
  ReplicaKind replicas;
  Implementation implementation;
  bool cuda;
  absl::StatusCode code;      // kOk: `backend`
  CollectiveBackend backend;  // when OK
  const char* message;        // a key part of the error
};

constexpr CollectiveBackend kL = CollectiveBackend::kLockstep;
constexpr CollectiveBackend kN = CollectiveBackend::kNccl;
constexpr ReplicaKind kCpu = ReplicaKind::kCpu;
constexpr ReplicaKind kGpu = ReplicaKind::kGpu;
constexpr absl::StatusCode kOk = absl::StatusCode::kOk;
constexpr absl::StatusCode kBad = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kUnimpl = absl::StatusCode::kUnimplemented;

const Row kTable[] = {
    {kCpu, Implementation::kAuto, false, kOk, kL, ""},
    {kCpu, Implementation::kAuto, true, kOk, kL, ""},
    {kGpu, Implementation::kAuto, true, kOk, kN, ""},
    {kGpu, Implementation::kAuto, false, kUnimpl, kL, "no CUDA/NCCL support"},
    {kCpu, Implementation::kRing, false, kOk, kL, ""},
    {kCpu, Implementation::kRing, true, kOk, kL, ""},
    {kGpu, Implementation::kRing, true, kBad, kL, "the replicas are GPUs"},
    {kCpu, Implementation::kNccl, false, kUnimpl, kL, "this build has no CUDA/NCCL support"},
    {kGpu, Implementation::kNccl, false, kUnimpl, kL, "this build has no CUDA/NCCL support"},
    {kCpu, Implementation::kNccl, true, kBad, kL, "NCCL needs GPU replicas"},
    {kGpu, Implementation::kNccl, true, kOk, kN, ""},
};

TEST(CommunicationBackendTest, WalksTheTable) {
  ASSERT_EQ(std::size(kTable), 11u);
  int row = 0;
  for (const Row& r : kTable) {
    SCOPED_TRACE(row++);
    absl::StatusOr<CollectiveBackend> got = ResolveBackend({r.implementation, r.replicas, r.cuda});
    ASSERT_EQ(got.status().code(), r.code) << got.status();
    if (r.code == kOk) {
      EXPECT_EQ(*got, r.backend);
    } else {
      EXPECT_THAT(std::string(got.status().message()),
                  StartsWith("communication.implementation: "));
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(r.message));
    }
  }
}

TEST(CommunicationBackendTest, ReadsTheSpecsField) {
  EXPECT_EQ(ImplementationFromSpec(v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED),
            Implementation::kAuto);
  EXPECT_EQ(ImplementationFromSpec(v1::CommunicationSpec::AUTO), Implementation::kAuto);
  EXPECT_EQ(ImplementationFromSpec(v1::CommunicationSpec::RING), Implementation::kRing);
  EXPECT_EQ(ImplementationFromSpec(v1::CommunicationSpec::NCCL), Implementation::kNccl);
}

// The strategies' check without a plan: the same decisions for their resolved devices, the
// strategy named. (With a plan's backend it checks only this worker's facts: strategy_test.)
TEST(CommunicationBackendTest, StrategiesCheckAgreesWithTheTable) {
  const std::vector<engine::Device> cpus = {engine::Device::Cpu(0), engine::Device::Cpu(1)};
  const std::vector<engine::Device> gpus = {engine::Device(engine::Device::Type::kCuda, 0)};
  int row = 0;
  for (const Row& r : kTable) {
    SCOPED_TRACE(row++);
    CommunicationOptions options;
    options.implementation = r.implementation;
    absl::StatusOr<CollectiveBackend> got =
        CheckBackend(options, r.replicas == kGpu ? gpus : cpus, r.cuda, "MirroredStrategy");
    absl::StatusOr<CollectiveBackend> want = ResolveBackend({r.implementation, r.replicas, r.cuda});
    ASSERT_EQ(got.status().code(), want.status().code());
    if (got.ok()) {
      EXPECT_EQ(*got, *want);
    } else {
      EXPECT_EQ(got.status().message(),
                std::string("MirroredStrategy: ") + std::string(want.status().message()));
    }
  }
  std::vector<engine::Device> mixed = cpus;
  mixed.push_back(gpus[0]);
  EXPECT_EQ(CheckBackend(CommunicationOptions{}, mixed, true, "MirroredStrategy").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::distribute
