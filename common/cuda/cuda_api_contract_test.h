// The CudaApi contract: one test body that every implementation passes, instantiated for
// FakeCudaApi in fake_cuda_api_test.cc (CPU CI) and for RealCudaApi in real_cuda_api_test.cc
// (requires-gpu), as PyTorch's instantiate_device_type_tests does. A Factory type provides
// `static absl::StatusOr<std::unique_ptr<CudaApi>> Make()`. Tests synchronise before every
// host read: on the fake, a test that forgot one would read stale data.
#ifndef LOCKSTEP_COMMON_CUDA_CUDA_API_CONTRACT_TEST_H_
#define LOCKSTEP_COMMON_CUDA_CUDA_API_CONTRACT_TEST_H_

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cuda/cuda_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {

template <typename Factory>
class CudaApiContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaApi>> api = Factory::Make();
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
  }

  // Device memory for `n` floats (freed by the test).
  float* DeviceFloats(size_t n) {
    absl::StatusOr<void*> p = api_->Malloc(n * sizeof(float));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? static_cast<float*>(*p) : nullptr;
  }

  std::unique_ptr<CudaApi> api_;
};

TYPED_TEST_SUITE_P(CudaApiContractTest);

TYPED_TEST_P(CudaApiContractTest, DevicesHaveProperties) {
  CudaApi& api = *this->api_;
  absl::StatusOr<int> count = api.DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_GE(*count, 1);
  absl::StatusOr<DeviceProperties> p = api.GetDeviceProperties(0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->name.empty());
  EXPECT_GT(p->total_memory, size_t{1} << 20);
  EXPECT_GT(p->multiprocessor_count, 0);
  EXPECT_GE(p->compute_major, 1);
  absl::Status bad = api.GetDeviceProperties(*count).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("CudaApi::GetDeviceProperties"));
  EXPECT_EQ(api.SetDevice(-1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(api.SetDevice(0).ok());
  EXPECT_EQ(*api.GetDevice(), 0);
}

TYPED_TEST_P(CudaApiContractTest, CopiesRoundTrip) {
  CudaApi& api = *this->api_;
  constexpr size_t kN = 3001;  // not a multiple of any alignment
  std::vector<float> in(kN), out(kN, -1.f), back(kN, -1.f);
  std::iota(in.begin(), in.end(), 0.5f);
  float* a = this->DeviceFloats(kN);
  float* b = this->DeviceFloats(kN);
  absl::StatusOr<CudaStream> s = api.StreamCreate();
  ASSERT_TRUE(s.ok()) << s.status();
  const size_t bytes = kN * sizeof(float);
  ASSERT_TRUE(api.MemcpyAsync(a, in.data(), bytes, CopyKind::kHostToDevice, *s).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), a, bytes, CopyKind::kDeviceToHost, *s).ok());
  ASSERT_TRUE(api.MemcpyAsync(b, a, bytes, CopyKind::kDeviceToDevice, *s).ok());
  ASSERT_TRUE(api.MemcpyAsync(back.data(), b, bytes, CopyKind::kDeviceToHost, *s).ok());
  ASSERT_TRUE(api.StreamSynchronize(*s).ok());
  EXPECT_EQ(out, in);
  EXPECT_EQ(back, in);
  // Zero bytes is a no-op, whatever the pointers.
  EXPECT_TRUE(api.MemcpyAsync(nullptr, nullptr, 0, CopyKind::kHostToDevice, *s).ok());
  EXPECT_TRUE(api.StreamDestroy(*s).ok());
  EXPECT_TRUE(api.Free(a).ok());
  EXPECT_TRUE(api.Free(b).ok());
}

TYPED_TEST_P(CudaApiContractTest, MemsetSetsBytes) {
  CudaApi& api = *this->api_;
  constexpr size_t kBytes = 1000;
  absl::StatusOr<void*> d = api.Malloc(kBytes);
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<unsigned char> out(kBytes, 0);
  ASSERT_TRUE(api.MemsetAsync(*d, 0x7f, kBytes, nullptr).ok());
  ASSERT_TRUE(api.MemsetAsync(static_cast<char*>(*d) + 10, 0x1ab, 5, nullptr).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), *d, kBytes, CopyKind::kDeviceToHost, nullptr).ok());
  ASSERT_TRUE(api.StreamSynchronize(nullptr).ok());
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(out[i], i >= 10 && i < 15 ? 0xab : 0x7f) << "byte " << i;
  }
  EXPECT_TRUE(api.Free(*d).ok());
}

// Stream 1 fills a buffer; stream 2, ordered after it by an event, copies it out. Only
// stream 2 is synchronised: the event must have carried stream 1's work along.
TYPED_TEST_P(CudaApiContractTest, EventOrdersTwoStreams) {
  CudaApi& api = *this->api_;
  constexpr size_t kN = 1 << 16;
  std::vector<float> in(kN), out(kN, 0.f);
  std::iota(in.begin(), in.end(), 1.f);
  float* a = this->DeviceFloats(kN);
  float* b = this->DeviceFloats(kN);
  CudaStream s1 = *api.StreamCreate(), s2 = *api.StreamCreate();
  CudaEvent e = *api.EventCreate();
  const size_t bytes = kN * sizeof(float);
  ASSERT_TRUE(api.MemsetAsync(a, 0, bytes, s1).ok());
  ASSERT_TRUE(api.MemcpyAsync(a, in.data(), bytes, CopyKind::kHostToDevice, s1).ok());
  ASSERT_TRUE(api.EventRecord(e, s1).ok());
  ASSERT_TRUE(api.StreamWaitEvent(s2, e).ok());
  ASSERT_TRUE(api.MemcpyAsync(b, a, bytes, CopyKind::kDeviceToDevice, s2).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), b, bytes, CopyKind::kDeviceToHost, s2).ok());
  ASSERT_TRUE(api.StreamSynchronize(s2).ok());
  EXPECT_EQ(out, in);
  // EventSynchronize waits for the recorded work on the host.
  ASSERT_TRUE(api.MemsetAsync(a, 0, bytes, s1).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), a, bytes, CopyKind::kDeviceToHost, s1).ok());
  ASSERT_TRUE(api.EventRecord(e, s1).ok());
  ASSERT_TRUE(api.EventSynchronize(e).ok());
  EXPECT_EQ(out, std::vector<float>(kN, 0.f));
  // EventQuery, polled (it never blocks), reports the captured work done, and a host buffer
  // it wrote is then complete.
  ASSERT_TRUE(api.MemcpyAsync(a, in.data(), bytes, CopyKind::kHostToDevice, s1).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), a, bytes, CopyKind::kDeviceToHost, s1).ok());
  ASSERT_TRUE(api.EventRecord(e, s1).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool done = false;
  while (!done && absl::Now() < deadline) {
    absl::StatusOr<bool> q = api.EventQuery(e);
    ASSERT_TRUE(q.ok()) << q.status();
    done = *q;
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(out, in);
  EXPECT_TRUE(api.EventDestroy(e).ok());
  EXPECT_TRUE(api.StreamDestroy(s1).ok());
  EXPECT_TRUE(api.StreamDestroy(s2).ok());
  EXPECT_TRUE(api.Free(a).ok());
  EXPECT_TRUE(api.Free(b).ok());
}

// Alloc/free cycles on one stream with no synchronisation reuse the pool's memory: the
// peak stays near one buffer (the bound allows for the pool's rounding), not eight, and use
// returns to where it was.
TYPED_TEST_P(CudaApiContractTest, PoolReusesFreedMemoryAndReportsPeak) {
  CudaApi& api = *this->api_;
  constexpr size_t kBytes = size_t{2} << 20;
  CudaStream s = *api.StreamCreate();
  ASSERT_TRUE(api.StreamSynchronize(s).ok());
  absl::StatusOr<PoolStats> before = api.GetPoolStats(0);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(api.ResetPoolPeak(0).ok());
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<void*> p = api.MallocAsync(kBytes, s);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(api.MemsetAsync(*p, i, kBytes, s).ok());
    ASSERT_TRUE(api.FreeAsync(*p, s).ok());
  }
  ASSERT_TRUE(api.StreamSynchronize(s).ok());
  absl::StatusOr<PoolStats> after = api.GetPoolStats(0);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->bytes_in_use, before->bytes_in_use);
  EXPECT_GE(after->peak_bytes_in_use, before->bytes_in_use + kBytes);
  EXPECT_LE(after->peak_bytes_in_use, before->bytes_in_use + 2 * kBytes);
  EXPECT_GE(after->bytes_reserved, after->bytes_in_use);
  EXPECT_EQ(api.GetPoolStats(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(api.StreamDestroy(s).ok());
}

// Pinned host memory is host memory (the host reads and writes it) that copies move
// asynchronously; only HostAlloc's memory may be given to HostFree.
TYPED_TEST_P(CudaApiContractTest, PinnedHostMemoryRoundTrips) {
  CudaApi& api = *this->api_;
  constexpr size_t kN = 3001;
  const size_t bytes = kN * sizeof(float);
  absl::StatusOr<void*> in = api.HostAlloc(bytes);
  absl::StatusOr<void*> out = api.HostAlloc(bytes);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(out.ok()) << out.status();
  float* host_in = static_cast<float*>(*in);
  float* host_out = static_cast<float*>(*out);
  std::iota(host_in, host_in + kN, 2.5f);
  std::memset(host_out, 0, bytes);
  float* d = this->DeviceFloats(kN);
  CudaStream s = *api.StreamCreate();
  ASSERT_TRUE(api.MemcpyAsync(d, host_in, bytes, CopyKind::kHostToDevice, s).ok());
  ASSERT_TRUE(api.MemcpyAsync(host_out, d, bytes, CopyKind::kDeviceToHost, s).ok());
  ASSERT_TRUE(api.StreamSynchronize(s).ok());
  EXPECT_EQ(std::vector<float>(host_out, host_out + kN), std::vector<float>(host_in, host_in + kN));
  absl::StatusOr<void*> none = api.HostAlloc(0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
  EXPECT_TRUE(api.HostFree(nullptr).ok());
  std::vector<float> pageable(4);
  absl::Status bad = api.HostFree(pageable.data());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("CudaApi::HostFree"));
  EXPECT_TRUE(api.HostFree(*in).ok());
  EXPECT_TRUE(api.HostFree(*out).ok());
  EXPECT_TRUE(api.StreamDestroy(s).ok());
  EXPECT_TRUE(api.Free(d).ok());
}

TYPED_TEST_P(CudaApiContractTest, BadArgumentsAreRefusedByName) {
  CudaApi& api = *this->api_;
  absl::Status oom = api.Malloc(size_t{1} << 50).status();
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted) << oom;
  EXPECT_THAT(oom.message(), ::testing::HasSubstr("CudaApi::Malloc"));
  absl::StatusOr<void*> zero = api.Malloc(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, nullptr);
  EXPECT_TRUE(api.Free(nullptr).ok());
  float host = 1;
  absl::Status null_dst = api.MemcpyAsync(nullptr, &host, 4, CopyKind::kHostToDevice, nullptr);
  EXPECT_EQ(null_dst.code(), absl::StatusCode::kInvalidArgument) << null_dst;
  EXPECT_THAT(null_dst.message(), ::testing::HasSubstr("CudaApi::MemcpyAsync"));
  absl::Status null_set = api.MemsetAsync(nullptr, 0, 4, nullptr);
  EXPECT_EQ(null_set.code(), absl::StatusCode::kInvalidArgument) << null_set;
  absl::Status no_event = api.EventRecord(nullptr, nullptr);
  EXPECT_EQ(no_event.code(), absl::StatusCode::kInvalidArgument) << no_event;
  EXPECT_THAT(no_event.message(), ::testing::HasSubstr("CudaApi::EventRecord"));
  EXPECT_EQ(api.StreamWaitEvent(nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(api.StreamDestroy(nullptr).code(), absl::StatusCode::kInvalidArgument);
  // The API still works after refusing.
  absl::StatusOr<void*> p = api.Malloc(64);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(api.Free(*p).ok());
}

// Timing events: a non-negative time between two marks once their work has run; events made
// without timing, never recorded, or null are refused by name.
TYPED_TEST_P(CudaApiContractTest, TimingEventsMeasureBetweenMarks) {
  CudaApi& api = *this->api_;
  constexpr size_t kN = 1 << 16;
  float* d = this->DeviceFloats(kN);
  CudaStream s = *api.StreamCreate();
  absl::StatusOr<CudaEvent> start = api.TimingEventCreate();
  absl::StatusOr<CudaEvent> end = api.TimingEventCreate();
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_TRUE(end.ok()) << end.status();
  absl::Status unrecorded = api.EventElapsedMs(*start, *end).status();
  EXPECT_EQ(unrecorded.code(), absl::StatusCode::kInvalidArgument) << unrecorded;
  ASSERT_TRUE(api.EventRecord(*start, s).ok());
  ASSERT_TRUE(api.MemsetAsync(d, 0, kN * sizeof(float), s).ok());
  ASSERT_TRUE(api.EventRecord(*end, s).ok());
  ASSERT_TRUE(api.StreamSynchronize(s).ok());
  absl::StatusOr<float> ms = api.EventElapsedMs(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
  absl::StatusOr<CudaEvent> plain = api.EventCreate();
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(api.EventRecord(*plain, s).ok());
  ASSERT_TRUE(api.StreamSynchronize(s).ok());
  absl::Status untimed = api.EventElapsedMs(*start, *plain).status();
  EXPECT_EQ(untimed.code(), absl::StatusCode::kInvalidArgument) << untimed;
  EXPECT_THAT(untimed.message(), ::testing::HasSubstr("CudaApi::EventElapsedMs"));
  EXPECT_EQ(api.EventElapsedMs(nullptr, *end).status().code(), absl::StatusCode::kInvalidArgument);
  for (CudaEvent e : {*start, *end, *plain}) EXPECT_TRUE(api.EventDestroy(e).ok());
  EXPECT_TRUE(api.StreamDestroy(s).ok());
  EXPECT_TRUE(api.Free(d).ok());
}

REGISTER_TYPED_TEST_SUITE_P(CudaApiContractTest, DevicesHaveProperties, CopiesRoundTrip,
                            MemsetSetsBytes, EventOrdersTwoStreams,
                            PoolReusesFreedMemoryAndReportsPeak, PinnedHostMemoryRoundTrips,
                            BadArgumentsAreRefusedByName, TimingEventsMeasureBetweenMarks);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_CUDA_API_CONTRACT_TEST_H_
