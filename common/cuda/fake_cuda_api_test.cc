#include "common/cuda/fake_cuda_api.h"

#include <vector>

#include "common/cuda/cuda_api_contract_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {

struct FakeFactory {
  static absl::StatusOr<std::unique_ptr<CudaApi>> Make() {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{32} << 20;
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create(options);
    if (!fake.ok()) return fake.status();
    return std::unique_ptr<CudaApi>(std::move(*fake));
  }
};

using FakeTypes = ::testing::Types<FakeFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Fake, CudaApiContractTest, FakeTypes);

namespace {

using ::testing::HasSubstr;

std::unique_ptr<FakeCudaApi> MakeFake(int devices = 1) {
  FakeCudaApi::Options options;
  options.device_count = devices;
  options.memory_bytes = size_t{1} << 20;
  absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create(options);
  EXPECT_TRUE(fake.ok()) << fake.status();
  return fake.ok() ? *std::move(fake) : nullptr;
}

TEST(FakeCudaApiDeathTest, HostReadOfDevicePointerDies) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  float* d = static_cast<float*>(*fake->Malloc(64));
  EXPECT_DEATH(
      {
        volatile float x = *d;
        (void)x;
      },
      "");
  // The fake's own view of the same memory is readable.
  EXPECT_NE(fake->HostView(d), nullptr);
  float host = 0;
  EXPECT_EQ(fake->HostView(&host), nullptr);
}

TEST(FakeCudaApiTest, MissingSynchronizationReadsStaleData) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  float* d = static_cast<float*>(*fake->Malloc(4 * sizeof(float)));
  const std::vector<float> in = {1, 2, 3, 4};
  std::vector<float> out(4, -1.f);
  ASSERT_TRUE(fake->MemcpyAsync(d, in.data(), 16, CopyKind::kHostToDevice, nullptr).ok());
  ASSERT_TRUE(fake->MemcpyAsync(out.data(), d, 16, CopyKind::kDeviceToHost, nullptr).ok());
  EXPECT_EQ(*fake->PendingWork(nullptr), 2);
  EXPECT_EQ(out, std::vector<float>(4, -1.f)) << "the copies ran before any synchronisation";
  ASSERT_TRUE(fake->StreamSynchronize(nullptr).ok());
  EXPECT_EQ(out, in);
}

// The counters tell pageable copies from pinned ones and count the host's waits: what a
// profile of a GPU step on the fake reads.
TEST(FakeCudaApiTest, CountersTellPinnedFromPageableCopiesAndCountHostWaits) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  float* d = static_cast<float*>(*fake->Malloc(64));
  std::vector<float> pageable(16, 1.f);
  float* pinned = static_cast<float*>(*fake->HostAlloc(64));
  ASSERT_TRUE(fake->MemcpyAsync(d, pageable.data(), 64, CopyKind::kHostToDevice, nullptr).ok());
  ASSERT_TRUE(fake->MemcpyAsync(pinned, d, 64, CopyKind::kDeviceToHost, nullptr).ok());
  ASSERT_TRUE(fake->MemcpyAsync(d, pinned + 8, 32, CopyKind::kHostToDevice, nullptr).ok());
  ASSERT_TRUE(fake->MemcpyAsync(d, d + 8, 32, CopyKind::kDeviceToDevice, nullptr).ok());
  ASSERT_TRUE(fake->StreamSynchronize(nullptr).ok());
  const FakeCudaApi::Counters c = fake->counters();
  EXPECT_EQ(c.pageable_copy_bytes, 64u);
  EXPECT_EQ(c.pageable_copies, 1);
  EXPECT_EQ(c.pinned_copy_bytes, 96u);
  EXPECT_EQ(c.pinned_copies, 2);
  EXPECT_EQ(c.host_waits, 1);
  EXPECT_EQ(pinned[0], 1.f);
  EXPECT_TRUE(fake->HostFree(pinned).ok());
  EXPECT_EQ(fake->HostFree(pinned).code(), absl::StatusCode::kInvalidArgument);
}

// Work on another stream is not ordered without an event: synchronising the reader's stream
// leaves the writer's copy unrun, every time.
TEST(FakeCudaApiTest, TwoStreamsWithoutAnEventAreNotOrdered) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  float* d = static_cast<float*>(*fake->Malloc(16));
  ASSERT_TRUE(fake->MemsetAsync(d, 0, 16, nullptr).ok());
  ASSERT_TRUE(fake->StreamSynchronize(nullptr).ok());
  CudaStream writer = *fake->StreamCreate(), reader = *fake->StreamCreate();
  const std::vector<float> in = {1, 2, 3, 4};
  std::vector<float> out(4, -1.f);
  ASSERT_TRUE(fake->MemcpyAsync(d, in.data(), 16, CopyKind::kHostToDevice, writer).ok());
  ASSERT_TRUE(fake->MemcpyAsync(out.data(), d, 16, CopyKind::kDeviceToHost, reader).ok());
  ASSERT_TRUE(fake->StreamSynchronize(reader).ok());
  EXPECT_EQ(out, std::vector<float>(4, 0.f));
  EXPECT_EQ(*fake->PendingWork(writer), 1);
}

TEST(FakeCudaApiTest, LaunchRunsWhenTheStreamRuns) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  float* d = static_cast<float*>(*fake->Malloc(16));
  ASSERT_TRUE(fake->MemsetAsync(d, 0, 16, nullptr).ok());
  bool ran = false;
  ASSERT_TRUE(fake->Launch(nullptr, "fill",
                           [&] {
                             float* v = fake->HostView(d);
                             for (int i = 0; i < 4; ++i) v[i] = 7.f;
                             ran = true;
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_FALSE(ran);
  std::vector<float> out(4, 0.f);
  ASSERT_TRUE(fake->MemcpyAsync(out.data(), d, 16, CopyKind::kDeviceToHost, nullptr).ok());
  ASSERT_TRUE(fake->StreamSynchronize(nullptr).ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(out, std::vector<float>(4, 7.f));
}

TEST(FakeCudaApiTest, InjectedOutOfMemoryFailsTheNthAllocation) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  fake->FailAllocation(2);
  absl::StatusOr<void*> first = fake->Malloc(256);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Status second = fake->MallocAsync(256, nullptr).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_THAT(second.message(), HasSubstr("CudaApi::MallocAsync(256 bytes)"));
  EXPECT_THAT(second.message(), HasSubstr("injected"));
  EXPECT_TRUE(fake->Malloc(256).ok());
  // Real exhaustion names what is left.
  absl::Status full = fake->Malloc(size_t{1} << 20).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("largest free block"));
}

TEST(FakeCudaApiTest, StickyErrorFailsEveryLaterCall) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  void* d = *fake->Malloc(256);
  fake->InjectStickyError("an illegal memory access in kernel Axpy");
  for (absl::Status s : {fake->DeviceCount().status(), fake->Malloc(16).status(), fake->Free(d),
                         fake->StreamSynchronize(nullptr), fake->EventCreate().status(),
                         fake->Launch(nullptr, "Scale", [] { return absl::OkStatus(); })}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(s.message(), HasSubstr("an illegal memory access in kernel Axpy"));
    EXPECT_THAT(s.message(), HasSubstr("CudaApi::"));
  }
}

TEST(FakeCudaApiTest, AKernelFaultIsStickyFromTheSynchronizationThatRanIt) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  ASSERT_TRUE(fake->Launch(nullptr, "Axpy",
                           [] { return absl::InternalError("Axpy: element 9 written twice"); })
                  .ok());
  bool ran_after = false;
  ASSERT_TRUE(fake->Launch(nullptr, "Scale",
                           [&] {
                             ran_after = true;
                             return absl::OkStatus();
                           })
                  .ok());
  absl::Status sync = fake->StreamSynchronize(nullptr);
  EXPECT_EQ(sync.code(), absl::StatusCode::kInternal) << sync;
  EXPECT_THAT(sync.message(), HasSubstr("element 9 written twice"));
  EXPECT_FALSE(ran_after) << "work after a fault ran";
  EXPECT_EQ(fake->Malloc(16).status().code(), absl::StatusCode::kInternal);
}

TEST(FakeCudaApiTest, CopiesOutsideAnAllocationAreRefused) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  char* d = static_cast<char*>(*fake->Malloc(300));  // rounded up to 512
  std::vector<char> host(1024);
  absl::Status past =
      fake->MemcpyAsync(d + 256, host.data(), 512, CopyKind::kHostToDevice, nullptr);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << past;
  EXPECT_THAT(past.message(), HasSubstr("not inside one live allocation"));
  absl::Status host_as_device =
      fake->MemcpyAsync(host.data(), host.data() + 512, 16, CopyKind::kDeviceToHost, nullptr);
  EXPECT_THAT(host_as_device.message(), HasSubstr("is not device memory"));
  absl::Status device_as_host = fake->MemcpyAsync(d, d, 16, CopyKind::kHostToDevice, nullptr);
  EXPECT_THAT(device_as_host.message(), HasSubstr("source"));
  ASSERT_TRUE(fake->Free(d).ok());
  absl::Status twice = fake->Free(d);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument) << twice;
  EXPECT_THAT(twice.message(), HasSubstr("freed twice"));
  absl::Status after_free = fake->MemcpyAsync(host.data(), d, 16, CopyKind::kDeviceToHost, nullptr);
  EXPECT_EQ(after_free.code(), absl::StatusCode::kInvalidArgument) << after_free;
}

TEST(FakeCudaApiTest, DestroyedHandlesAreRefused) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake();
  CudaStream s = *fake->StreamCreate();
  CudaEvent e = *fake->EventCreate();
  ASSERT_TRUE(fake->StreamDestroy(s).ok());
  ASSERT_TRUE(fake->EventDestroy(e).ok());
  EXPECT_THAT(fake->StreamSynchronize(s).message(), HasSubstr("not a live stream"));
  EXPECT_THAT(fake->EventSynchronize(e).message(), HasSubstr("not a live event"));
}

TEST(FakeCudaApiTest, DevicesHaveTheirOwnMemoryAndPools) {
  std::unique_ptr<FakeCudaApi> fake = MakeFake(/*devices=*/2);
  ASSERT_TRUE(fake->SetDevice(1).ok());
  CudaStream s = *fake->StreamCreate();
  void* p = *fake->MallocAsync(1000, s);
  EXPECT_EQ(fake->GetPoolStats(1)->bytes_in_use, 1024u);
  EXPECT_EQ(fake->GetPoolStats(0)->bytes_in_use, 0u);
  ASSERT_TRUE(fake->FreeAsync(p, s).ok());
  // Before the free runs, the pool holds the memory for this stream.
  EXPECT_EQ(fake->GetPoolStats(1)->bytes_in_use, 0u);
  EXPECT_EQ(fake->GetPoolStats(1)->bytes_reserved, 1024u);
  EXPECT_EQ(*fake->MallocAsync(512, s), p) << "freed on this stream: reused in stream order";
  EXPECT_EQ(fake->GetPoolStats(1)->peak_bytes_in_use, 1024u);
  EXPECT_EQ(fake->SetDevice(2).code(), absl::StatusCode::kInvalidArgument);
}

// The fake's elapsed "time" is the count of work between the marks, and is refused until the
// stream has run that work.
TEST(FakeCudaApiTest, TimingEventsCountTheWorkBetweenThemOnceItRan) {
  std::unique_ptr<FakeCudaApi> api = MakeFake();
  CudaStream s = *api->StreamCreate();
  CudaEvent start = *api->TimingEventCreate();
  CudaEvent end = *api->TimingEventCreate();
  ASSERT_TRUE(api->EventRecord(start, s).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(api->Launch(s, "k", [] { return absl::OkStatus(); }).ok());
  }
  ASSERT_TRUE(api->EventRecord(end, s).ok());
  absl::Status early = api->EventElapsedMs(start, end).status();
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  ASSERT_TRUE(api->StreamSynchronize(s).ok());
  absl::StatusOr<float> ms = api->EventElapsedMs(start, end);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(*ms, 3.0f);
  EXPECT_EQ(api->counters().timing_events_created, 2);
  EXPECT_EQ(api->counters().events_recorded, 2);
}

}  // namespace
}  // namespace lockstep
