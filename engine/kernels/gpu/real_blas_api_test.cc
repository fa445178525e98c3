// BlasApi's contract (blas_api_contract_test.h) on a GPU (requires-gpu): RealBlasApi over
// cuBLASLt on RealCudaApi, TF32 off, against the same exact references as the fake.
#include "engine/kernels/gpu/real_blas_api.h"

#include <utility>
#include <vector>

#include "common/cuda/real_cuda_api.h"
#include "engine/kernels/gpu/blas_api_contract_test.h"

namespace lockstep::engine::gpu {
namespace {

struct RealBackend {
  static absl::StatusOr<BlasBackend> Make() {
    absl::StatusOr<std::unique_ptr<RealCudaApi>> api = RealCudaApi::Create();
    if (!api.ok()) return api.status();
    absl::StatusOr<std::unique_ptr<RealBlasApi>> blas = RealBlasApi::Create(api->get());
    if (!blas.ok()) return blas.status();
    BlasBackend b;
    b.api = *std::move(api);
    b.blas = *std::move(blas);
    return b;
  }
};

using RealBackends = ::testing::Types<RealBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Real, BlasApiContractTest, RealBackends);

// The plan cache: a second product of the same shape reuses the first one's plan (no second
// heuristic) and still adds its own bias; another shape makes a plan of its own.
TEST(RealBlasApiTest, PlansAreReusedPerShapeWithEachCallsBias) {
  absl::StatusOr<std::unique_ptr<RealCudaApi>> api = RealCudaApi::Create();
  ASSERT_TRUE(api.ok()) << api.status();
  absl::StatusOr<std::unique_ptr<RealBlasApi>> blas = RealBlasApi::Create(api->get());
  ASSERT_TRUE(blas.ok()) << blas.status();
  CudaApi& cuda = **api;
  constexpr int64_t kM = 3, kN = 5, kK = 7;
  const std::vector<float> a = SmallInts(kM * kK, 1), b = SmallInts(kK * kN, 2);
  const std::vector<float> bias1 = SmallInts(kN, 3), bias2 = SmallInts(kN, 4);
  auto device = [&](const std::vector<float>& host) {
    float* d = static_cast<float*>(*cuda.Malloc(host.size() * sizeof(float)));
    EXPECT_TRUE(cuda.MemcpyAsync(d, host.data(), host.size() * sizeof(float),
                                 CopyKind::kHostToDevice, nullptr)
                    .ok());
    return d;
  };
  float *da = device(a), *db = device(b), *dbias1 = device(bias1), *dbias2 = device(bias2);
  float* dc = static_cast<float*>(*cuda.Malloc(kM * kN * sizeof(float)));
  GemmArgs g;
  g.m = kM;
  g.n = kN;
  g.k = kK;
  g.a = da;
  g.b = db;
  g.c = dc;
  g.epilogue = Epilogue::kBias;
  for (const auto& [bias, host] : {std::pair{dbias1, &bias1}, std::pair{dbias2, &bias2}}) {
    g.bias = bias;
    ASSERT_TRUE((*blas)->Gemm(g, nullptr).ok());
    std::vector<float> out(kM * kN);
    ASSERT_TRUE(cuda.MemcpyAsync(out.data(), dc, out.size() * sizeof(float),
                                 CopyKind::kDeviceToHost, nullptr)
                    .ok());
    ASSERT_TRUE(cuda.StreamSynchronize(nullptr).ok());
    const std::vector<double> want =
        ReferenceGemm(g, a, b, std::vector<float>(kM * kN, 0.f), *host);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], want[i]) << i;
  }
  RealBlasApi::PlanCacheStats stats = (*blas)->plan_cache_stats();
  EXPECT_EQ(stats.plans, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 1);
  g.trans_a = true;  // A read as [k, m]: another plan
  ASSERT_TRUE((*blas)->Gemm(g, nullptr).ok());
  ASSERT_TRUE(cuda.StreamSynchronize(nullptr).ok());
  EXPECT_EQ((*blas)->plan_cache_stats().plans, 2);
  for (float* p : {da, db, dbias1, dbias2, dc}) EXPECT_TRUE(cuda.Free(p).ok());
}

}  // namespace
}  // namespace lockstep::engine::gpu
