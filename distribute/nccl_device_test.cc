// GPU replicas' values in device memory, on CPU machines: fake GPUs (fake_gpu_devices.h) and
// the multi-rank fake NCCL reading their memory (FakeNcclWorld::UseDeviceMemory).
//   - BF16 compression over NcclAllReduce with 2 and 4 ranks: each pack's f32 gradients are
//     narrowed on the device (CastToBFloat16), all-reduced as bf16, widened back
//     (CastFromBFloat16). The result is exactly the fake NCCL's documented bf16 sum (rank 0's
//     bf16 values, then each next rank's added in f32 and rounded to bf16), differs from the
//     f32 all-reduce (the control) and lies within bf16's error bound of it; the scratch is the
//     caching allocator's blocks again in later steps.
//   - The packs' all-reduces run on a communication stream per GPU, with and without BF16;
//     leaving out the compute -> communication event wait (a test hook) reads stale gradients.
//   - The digits MLP trained by Mirrored over 2 fake GPUs with BF16 compression: it trains, its
//     losses within a few percent of the f32 run's, not equal to them.
//   - ReplicaContext::AllReduce / AllReduceAsync / BatchAllReduce on device tensors, over
//     NcclAllReduce (in place on the device) and over ReductionToOneDevice (staged through the
//     host), with replicas that disagree on dtype or shape refused naming the argument.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "common/bfloat16.h"
#include "common/status.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/nccl_all_reduce.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {
namespace {

using collectives::nccl::FakeNcclApi;
using collectives::nccl::FakeNcclWorld;
using engine::Shape;
using engine::Tensor;
using ::testing::HasSubstr;

// Replica r's gradients: sizes that fill packs of 256 bytes partly (3, 40 floats) and one
// alone (100 floats >= the pack), values with bits below bf16's precision.
std::vector<std::vector<float>> GradientsOf(int r) {
  std::vector<std::vector<float>> g = {std::vector<float>(3), std::vector<float>(40),
                                       std::vector<float>(100)};
  uint32_t x = 12345u + 977u * static_cast<uint32_t>(r);
  for (auto& t : g) {
    for (float& v : t) {
      x = x * 1664525u + 1013904223u;
      v = (static_cast<float>(x >> 8) / static_cast<float>(1 << 24) - 0.5f) * (4.f + r);
    }
  }
  return g;
}

// The fake NCCL's bf16 sum (fake_nccl_world.h): rank 0's values rounded to bf16, then each
// next rank's (rounded to bf16 by the narrowing) added in f32 and the sum rounded to bf16.
float FakeNcclBf16Sum(const std::vector<float>& per_rank) {
  float acc = RoundToBFloat16(per_rank[0]);
  for (size_t r = 1; r < per_rank.size(); ++r) {
    acc = RoundToBFloat16(acc + RoundToBFloat16(per_rank[r]));
  }
  return acc;
}

class DeviceNcclTest : public ::testing::Test {
 protected:
  void Make(int n) {
    absl::StatusOr<FakeGpus> gpus = MakeFakeGpus(n);
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    gpus_ = *std::move(gpus);
    world_ = std::make_unique<FakeNcclWorld>();
    world_->UseDeviceMemory(gpus_.api.get());
    nccl_ = std::make_unique<FakeNcclApi>(world_.get());
  }

  // NcclAllReduce over every fake GPU with `compression` (packs of 256 bytes).
  std::unique_ptr<NcclAllReduce> Ops(int n, collectives::Compression compression) {
    NcclAllReduceOptions o;
    o.env.api = nccl_.get();
    for (int d = 0; d < n; ++d) o.devices.emplace_back(engine::Device::Type::kCuda, d);
    o.gpus = gpus_.devices;
    o.num_replicas_in_sync = n;
    o.communication.timeout = absl::Seconds(20);
    o.communication.bytes_per_pack = 256;
    o.communication.compression = compression;
    absl::StatusOr<std::unique_ptr<NcclAllReduce>> ops = NcclAllReduce::Create(o);
    EXPECT_TRUE(ops.ok()) << ops.status();
    return ops.ok() ? *std::move(ops) : nullptr;
  }

  // `steps` steps of every replica's GradientsOf through its GradientReducer, in device
  // memory; each replica's results of the last step, on the host, end to end. `lazy`: each
  // gradient is written by a device-to-device copy left on the compute stream (as a backward
  // kernel would write it), not yet run when the gradient is handed to the reducer.
  std::vector<std::vector<float>> Reduce(CrossDeviceOps& ops, int n, int steps = 1,
                                         bool lazy = false) {
    std::vector<std::vector<float>> out(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        const engine::gpu::GpuDevice* gpu = gpus_.devices->Find(r);
        const engine::Device device(engine::Device::Type::kCuda, r);
        for (int step = 0; step < steps; ++step) {
          std::vector<Tensor> grads, sources;
          for (const std::vector<float>& g : GradientsOf(r)) {
            const Shape shape{static_cast<int64_t>(g.size())};
            absl::StatusOr<Tensor> t = CopyToDevice(
                Tensor::FromVector<float>(lazy ? std::vector<float>(g.size()) : g, shape), device,
                gpu);
            ASSERT_TRUE(t.ok()) << t.status();
            grads.push_back(*std::move(t));
            if (!lazy) continue;
            absl::StatusOr<Tensor> src =
                CopyToDevice(Tensor::FromVector<float>(g, shape), device, gpu);
            ASSERT_TRUE(src.ok()) << src.status();
            sources.push_back(*std::move(src));  // alive until the copies have run
          }
          // After every CopyToDevice (each synchronises): the copies stay pending.
          for (size_t i = 0; i < sources.size(); ++i) {
            ASSERT_TRUE(gpus_.api
                            ->MemcpyAsync(grads[i].raw_device_data(), sources[i].raw_device_data(),
                                          grads[i].num_elements() * sizeof(float),
                                          CopyKind::kDeviceToDevice, gpu->stream())
                            .ok());
          }
          auto reducer =
              ops.MakeGradientReducer(r, ReduceOp::kSum, absl::Now() + absl::Seconds(20));
          for (Tensor& g : grads) reducer->Add(&g);
          absl::Status s = reducer->Finish();
          ASSERT_TRUE(s.ok()) << s;
          out[r].clear();
          for (const Tensor& g : grads) {
            absl::StatusOr<Tensor> host = ToHost(g, gpu);
            ASSERT_TRUE(host.ok()) << host.status();
            std::vector<float> v = host->ToVector<float>();
            out[r].insert(out[r].end(), v.begin(), v.end());
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

  FakeGpus gpus_;
  std::unique_ptr<FakeNcclWorld> world_;
  std::unique_ptr<FakeNcclApi> nccl_;
};

TEST_F(DeviceNcclTest, Bf16CompressionIsTheFakesBf16SumWithinBoundOfF32) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " ranks"));
    Make(n);
    std::unique_ptr<NcclAllReduce> bf16 = Ops(n, collectives::Compression::kBF16);
    std::unique_ptr<NcclAllReduce> f32 = Ops(n, collectives::Compression::kNone);
    ASSERT_TRUE(bf16 != nullptr && f32 != nullptr);
    const std::vector<std::vector<float>> got = Reduce(*bf16, n);
    const std::vector<std::vector<float>> exact = Reduce(*f32, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));

    // Every rank's inputs, end to end, per element.
    std::vector<std::vector<float>> inputs(n);
    for (int r = 0; r < n; ++r) {
      for (const std::vector<float>& g : GradientsOf(r)) {
        inputs[r].insert(inputs[r].end(), g.begin(), g.end());
      }
    }
    const size_t count = inputs[0].size();
    int differs = 0;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(got[r].size(), count);
      ASSERT_EQ(exact[r].size(), count);
      for (size_t i = 0; i < count; ++i) {
        std::vector<float> per_rank(n);
        double magnitude = 0;
        for (int k = 0; k < n; ++k) {
          per_rank[k] = inputs[k][i];
          magnitude += std::fabs(inputs[k][i]);
        }
        // The reference, bit for bit.
        ASSERT_EQ(FloatBits(got[r][i]), FloatBits(FakeNcclBf16Sum(per_rank)))
            << "rank " << r << " element " << i;
        // bf16 keeps 8 significant bits (unit roundoff u = 2^-8): n narrowings and n - 1
        // rounded additions each err by at most u times the sum of magnitudes.
        EXPECT_LE(std::fabs(got[r][i] - exact[r][i]), n * std::ldexp(magnitude, -8) * 1.01)
            << "rank " << r << " element " << i;
        differs += got[r][i] != exact[r][i];
      }
    }
    // The control: compression changed the result (the f32 sum is not bf16-representable).
    EXPECT_GT(differs, static_cast<int>(count) * n / 2);

    // The wire carried bf16: f32 tensors went as bf16 all-reduces, the f32 ops' as f32.
    const std::vector<std::string> calls = nccl_->calls();
    EXPECT_NE(
        std::find_if(calls.begin(), calls.end(),
                     [](const std::string& c) { return c.rfind("all-reduce bf16 sum", 0) == 0; }),
        calls.end());
    EXPECT_NE(
        std::find_if(calls.begin(), calls.end(),
                     [](const std::string& c) { return c.rfind("all-reduce f32 sum", 0) == 0; }),
        calls.end());
  }
}

TEST_F(DeviceNcclTest, Bf16ScratchIsReusedAcrossSteps) {
  Make(2);
  std::unique_ptr<NcclAllReduce> bf16 = Ops(2, collectives::Compression::kBF16);
  ASSERT_TRUE(bf16 != nullptr);
  const std::vector<std::vector<float>> first = Reduce(*bf16, 2, /*steps=*/1);
  const int64_t after_one = gpus_.devices->Find(0)->context->allocator_stats().device_allocations;
  const int64_t hits_one = gpus_.devices->Find(0)->context->allocator_stats().cache_hits;
  const std::vector<std::vector<float>> later = Reduce(*bf16, 2, /*steps=*/3);
  const engine::gpu::AllocatorStats stats = gpus_.devices->Find(0)->context->allocator_stats();
  // Three more steps (their gradients and scratch) took no new device memory: cache hits.
  EXPECT_EQ(stats.device_allocations, after_one);
  EXPECT_GT(stats.cache_hits, hits_one);
  EXPECT_EQ(later, first);  // and the same inputs gave the same results
}

// Every rank's GradientsOf, end to end, summed in rank order (the fake NCCL's f32 sum).
std::vector<float> F32Sum(int n) {
  std::vector<float> sum;
  for (int r = 0; r < n; ++r) {
    std::vector<float> all;
    for (const std::vector<float>& g : GradientsOf(r)) all.insert(all.end(), g.begin(), g.end());
    if (sum.empty()) sum.assign(all.size(), 0.f);
    for (size_t i = 0; i < all.size(); ++i) sum[i] = r == 0 ? all[i] : sum[i] + all[i];
  }
  return sum;
}

// Each replica's packs go to NCCL on the communication stream NcclAllReduce made for its GPU
// (not the compute stream, not the default stream), with and without BF16 compression (whose
// narrowing and widening stay on the compute stream, ordered by the events), and the results
// are the fake NCCL's sums.
TEST_F(DeviceNcclTest, PacksAreAllReducedOnACommunicationStreamOfTheirOwn) {
  Make(2);
  for (collectives::Compression c :
       {collectives::Compression::kNone, collectives::Compression::kBF16}) {
    SCOPED_TRACE(c == collectives::Compression::kBF16 ? "bf16" : "f32");
    const size_t before = nccl_->collective_streams().size();
    std::unique_ptr<NcclAllReduce> ops = Ops(2, c);
    ASSERT_TRUE(ops != nullptr);
    const std::vector<std::vector<float>> got = Reduce(*ops, 2, /*steps=*/2, /*lazy=*/true);
    const std::vector<NcclAllReduce::CommStream>& comm = ops->comm_streams();
    ASSERT_EQ(comm.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      ASSERT_NE(comm[r].stream, nullptr);
      EXPECT_NE(comm[r].stream, gpus_.devices->Find(r)->stream());
    }
    const std::vector<collectives::nccl::DeviceStream> streams = nccl_->collective_streams();
    ASSERT_GT(streams.size(), before);
    for (size_t i = before; i < streams.size(); ++i) {
      EXPECT_TRUE(streams[i] == comm[0].stream || streams[i] == comm[1].stream)
          << "collective " << i << " was enqueued on another stream";
    }
    const std::vector<float> f32 = F32Sum(2);
    std::vector<std::vector<float>> inputs(2);
    for (int r = 0; r < 2; ++r) {
      for (const std::vector<float>& g : GradientsOf(r)) {
        inputs[r].insert(inputs[r].end(), g.begin(), g.end());
      }
    }
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(got[r].size(), f32.size());
      for (size_t i = 0; i < f32.size(); ++i) {
        const float want = c == collectives::Compression::kBF16
                               ? FakeNcclBf16Sum({inputs[0][i], inputs[1][i]})
                               : f32[i];
        ASSERT_EQ(FloatBits(got[r][i]), FloatBits(want)) << "rank " << r << " element " << i;
      }
    }
  }
}

// The mutation: without the compute -> communication stream event wait, NCCL reads the
// gradients before the compute stream has written them (the fake's streams are lazy, so
// every time): the result is not the sum. The test that the order is really carried by the
// event, not by luck.
TEST_F(DeviceNcclTest, WithoutTheComputeStreamsEventTheAllReduceReadsStaleGradients) {
  Make(2);
  NcclAllReduceOptions o;
  o.env.api = nccl_.get();
  o.devices = {engine::Device(engine::Device::Type::kCuda, 0),
               engine::Device(engine::Device::Type::kCuda, 1)};
  o.gpus = gpus_.devices;
  o.num_replicas_in_sync = 2;
  o.communication.timeout = absl::Seconds(20);
  o.communication.bytes_per_pack = 256;
  o.test_skip_producer_wait = true;
  absl::StatusOr<std::unique_ptr<NcclAllReduce>> ops = NcclAllReduce::Create(o);
  ASSERT_TRUE(ops.ok()) << ops.status();
  const std::vector<std::vector<float>> got = Reduce(**ops, 2, /*steps=*/1, /*lazy=*/true);
  const std::vector<float> f32 = F32Sum(2);
  int wrong = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), f32.size());
    for (size_t i = 0; i < f32.size(); ++i) wrong += FloatBits(got[r][i]) != FloatBits(f32[i]);
  }
  EXPECT_EQ(wrong, static_cast<int>(2 * f32.size()));
}

TEST_F(DeviceNcclTest, MirroredOverTwoGpusTrainsWithBf16Compression) {
  constexpr int kSteps = 60;
  Make(2);
  auto train = [&](collectives::Compression compression) {
    MirroredStrategyOptions o;
    o.available.num_gpus = 2;
    o.available.gpus = gpus_.devices;
    o.nccl.api = nccl_.get();
    o.communication.timeout = absl::Seconds(20);
    o.communication.compression = compression;
    auto s = MirroredStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->extended().cross_device_ops().kind(), CrossDeviceOpsKind::kNcclAllReduce);
    return TrainDigits(**s, kSteps);
  };
  const TrainedRun f32 = train(collectives::Compression::kNone);
  const TrainedRun bf16 = train(collectives::Compression::kBF16);
  ASSERT_EQ(bf16.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(f32.losses.size(), static_cast<size_t>(kSteps));
  // It trains (each step's batch differs: the mean of the last ten steps against the first)...
  auto mean = [](const std::vector<double>& v, int first) {
    double s = 0;
    for (int i = first; i < first + 10; ++i) s += v[i];
    return s / 10;
  };
  // (SGD at 0.1 with label smoothing: 2.36 -> 2.23 over these 60 steps.)
  EXPECT_LT(mean(bf16.losses, kSteps - 10), 0.97 * mean(bf16.losses, 0));
  // ...about as f32 does (bf16 gradients: within a few percent per step)...
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(bf16.losses[i], f32.losses[i], 0.03 * f32.losses[i]) << "step " << i;
  }
  // ...but on gradients that really went as bf16: not the f32 run's.
  EXPECT_NE(bf16.losses, f32.losses);
  EXPECT_FALSE(SameWeights(bf16.weights, f32.weights, /*rel=*/0));
  const std::vector<std::string> calls = nccl_->calls();
  EXPECT_NE(
      std::find_if(calls.begin(), calls.end(),
                   [](const std::string& c) { return c.rfind("all-reduce bf16 sum", 0) == 0; }),
      calls.end());
}

// ReplicaContext on device tensors, over NCCL and over ReductionToOneDevice.
class DeviceReplicaContextTest : public DeviceNcclTest,
                                 public ::testing::WithParamInterface<CrossDeviceOpsKind> {
 protected:
  void SetUp() override {
    Make(2);
    MirroredStrategyOptions o;
    o.available.num_gpus = 2;
    o.available.gpus = gpus_.devices;
    o.nccl.api = nccl_.get();
    o.cross_device_ops = GetParam();
    o.communication.timeout = absl::Seconds(20);
    auto s = MirroredStrategy::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    strategy_ = *std::move(s);
  }

  // Runs `fn` on both replicas with their device handles; the replicas' statuses.
  std::vector<absl::Status> RunBoth(
      const std::function<absl::Status(ReplicaContext&, const engine::gpu::GpuDevice*)>& fn) {
    std::vector<absl::Status> statuses(2);
    auto result = strategy_->Run(
        [&](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
          const engine::gpu::GpuDevice* gpu = gpus_.devices->Find(ctx.device().index());
          statuses[ctx.local_replica_id()] = fn(ctx, gpu);
          return Tensor::Scalar<float>(0);
        });
    EXPECT_TRUE(result.ok()) << result.status();
    return statuses;
  }

  std::unique_ptr<Strategy> strategy_;
};

absl::StatusOr<Tensor> OnDevice(std::vector<float> v, const ReplicaContext& ctx,
                                const engine::gpu::GpuDevice* gpu) {
  const int64_t n = v.size();
  return CopyToDevice(Tensor::FromVector<float>(v, Shape{n}), ctx.device(), gpu);
}

absl::Status Expect(const Tensor& got, const std::vector<float>& want,
                    const engine::gpu::GpuDevice* gpu, const engine::Device& device) {
  if (got.device() != device) {
    return absl::InternalError(absl::StrCat("result on ", got.device().name()));
  }
  absl::StatusOr<Tensor> host = ToHost(got, gpu);
  if (!host.ok()) return host.status();
  if (host->ToVector<float>() != want) {
    return absl::InternalError(absl::StrCat("result ", host->DebugString(), " is not the want"));
  }
  return absl::OkStatus();
}

TEST_P(DeviceReplicaContextTest, AllReducesDeviceTensorsOnTheirDevice) {
  std::vector<absl::Status> s =
      RunBoth([](ReplicaContext& ctx, const engine::gpu::GpuDevice* gpu) -> absl::Status {
        const float r = static_cast<float>(ctx.replica_id_in_sync_group());
        LS_ASSIGN_OR_RETURN(Tensor value, OnDevice({1.f + r, 2.f * r, -3.f}, ctx, gpu));
        // AllReduce: a new device tensor; `value` unchanged.
        LS_ASSIGN_OR_RETURN(Tensor sum, ctx.AllReduce(ReduceOp::kSum, value));
        LS_RETURN_IF_ERROR(Expect(sum, {3.f, 2.f, -6.f}, gpu, ctx.device()));
        LS_RETURN_IF_ERROR(Expect(value, {1.f + r, 2.f * r, -3.f}, gpu, ctx.device()));
        LS_ASSIGN_OR_RETURN(Tensor mean, ctx.AllReduce(ReduceOp::kMean, value));
        LS_RETURN_IF_ERROR(Expect(mean, {1.5f, 1.f, -3.f}, gpu, ctx.device()));
        // AllReduceAsync and BatchAllReduce: in place.
        LS_RETURN_IF_ERROR(ctx.AllReduceAsync(ReduceOp::kSum, &value)->Wait());
        LS_RETURN_IF_ERROR(Expect(value, {3.f, 2.f, -6.f}, gpu, ctx.device()));
        LS_ASSIGN_OR_RETURN(Tensor a, OnDevice({r}, ctx, gpu));
        LS_ASSIGN_OR_RETURN(Tensor b, OnDevice({10.f, 20.f * r}, ctx, gpu));
        LS_RETURN_IF_ERROR(ctx.BatchAllReduce(ReduceOp::kMean, {&a, &b}));
        LS_RETURN_IF_ERROR(Expect(a, {0.5f}, gpu, ctx.device()));
        return Expect(b, {10.f, 10.f}, gpu, ctx.device());
      });
  EXPECT_TRUE(s[0].ok()) << s[0];
  EXPECT_TRUE(s[1].ok()) << s[1];
  // Over NCCL the device buffers went to NCCL; otherwise nothing did.
  const std::vector<std::string> calls = nccl_->calls();
  const bool nccl_used = std::find_if(calls.begin(), calls.end(), [](const std::string& c) {
                           return c.rfind("all-reduce f32 sum count 3", 0) == 0;
                         }) != calls.end();
  EXPECT_EQ(nccl_used, GetParam() == CrossDeviceOpsKind::kNcclAllReduce);
}

TEST_P(DeviceReplicaContextTest, ReplicasThatDisagreeAreRefusedNamingTheArgument) {
  // Shape: replica 1 passes 4 elements, replica 0 three.
  std::vector<absl::Status> shape =
      RunBoth([](ReplicaContext& ctx, const engine::gpu::GpuDevice* gpu) -> absl::Status {
        const int r = ctx.replica_id_in_sync_group();
        LS_ASSIGN_OR_RETURN(Tensor v, OnDevice(std::vector<float>(3 + r, 1.f), ctx, gpu));
        return ctx.AllReduce(ReduceOp::kSum, v).status();
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(shape[r].code(), absl::StatusCode::kInvalidArgument) << shape[r];
    EXPECT_THAT(shape[r].message(), HasSubstr("argument `value`"));
    EXPECT_THAT(shape[r].message(), HasSubstr(absl::StrCat("f32[", 3 + r, "]")));
  }
  // Dtype: replica 1 passes i32 of the same shape.
  std::vector<absl::Status> dtype =
      RunBoth([](ReplicaContext& ctx, const engine::gpu::GpuDevice* gpu) -> absl::Status {
        const Tensor host = ctx.replica_id_in_sync_group() == 0
                                ? Tensor::FromVector<float>({1.f, 2.f}, Shape{2})
                                : Tensor::FromVector<int32_t>({1, 2}, Shape{2});
        LS_ASSIGN_OR_RETURN(Tensor v, CopyToDevice(host, ctx.device(), gpu));
        return ctx.BatchAllReduce(ReduceOp::kSum, {&v});
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(dtype[r].code(), absl::StatusCode::kInvalidArgument) << dtype[r];
    EXPECT_THAT(dtype[r].message(), HasSubstr("disagree on argument `value`"));
  }
  // After the refusals the strategy still all-reduces (they were caught before the data).
  std::vector<absl::Status> after =
      RunBoth([](ReplicaContext& ctx, const engine::gpu::GpuDevice* gpu) -> absl::Status {
        LS_ASSIGN_OR_RETURN(Tensor v, OnDevice({2.f}, ctx, gpu));
        LS_ASSIGN_OR_RETURN(Tensor sum, ctx.AllReduce(ReduceOp::kSum, v));
        return Expect(sum, {4.f}, gpu, ctx.device());
      });
  EXPECT_TRUE(after[0].ok()) << after[0];
  EXPECT_TRUE(after[1].ok()) << after[1];
}

TEST_P(DeviceReplicaContextTest, ATensorOfAnotherDeviceIsRefusedNamingIt) {
  std::vector<absl::Status> s =
      RunBoth([&](ReplicaContext& ctx, const engine::gpu::GpuDevice*) -> absl::Status {
        // Replica 0 passes a tensor of /gpu:1, another device's (replica 1 calls nothing).
        if (ctx.local_replica_id() == 1) return absl::OkStatus();
        const engine::Device gpu1(engine::Device::Type::kCuda, 1);
        LS_ASSIGN_OR_RETURN(Tensor v, CopyToDevice(Tensor::FromVector<float>({1.f}, Shape{1}), gpu1,
                                                   gpus_.devices->Find(1)));
        return ctx.AllReduce(ReduceOp::kSum, v).status();
      });
  EXPECT_EQ(s[0].code(), absl::StatusCode::kInvalidArgument) << s[0];
  EXPECT_THAT(s[0].message(), HasSubstr("argument `value`"));
  EXPECT_THAT(s[0].message(), HasSubstr("/gpu:1"));
  EXPECT_TRUE(s[1].ok());
}

INSTANTIATE_TEST_SUITE_P(Ops, DeviceReplicaContextTest,
                         ::testing::Values(CrossDeviceOpsKind::kNcclAllReduce,
                                           CrossDeviceOpsKind::kReduceToOneDevice),
                         [](const ::testing::TestParamInfo<CrossDeviceOpsKind>& info) {
                           return std::string(info.param == CrossDeviceOpsKind::kNcclAllReduce
                                                  ? "Nccl"
                                                  : "ReductionToOneDevice");
                         });

}  // namespace
}  // namespace lockstep::distribute
