// Needs a GPU (requires-gpu): the kernels against the same loops on the CPU.
#include "engine/kernels/cuda/elementwise.h"

#include <cmath>
#include <vector>

#include "common/cuda/cuda_status.h"
#include "gtest/gtest.h"

namespace lockstep::engine::cuda {
namespace {

// A device buffer holding `host`; freed at scope end.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : n_(host.size()) {
    EXPECT_TRUE(CudaStatus(cudaMalloc(&p_, n_ * sizeof(float) + 1), "cudaMalloc").ok());
    EXPECT_TRUE(CudaStatus(cudaMemcpy(p_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice),
                           "cudaMemcpy")
                    .ok());
  }
  ~DeviceBuffer() { cudaFree(p_); }
  float* get() { return static_cast<float*>(p_); }
  std::vector<float> Read() {
    std::vector<float> out(n_);
    EXPECT_TRUE(CudaStatus(cudaMemcpy(out.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
                           "cudaMemcpy")
                    .ok());
    return out;
  }

 private:
  size_t n_;
  void* p_ = nullptr;
};

std::vector<float> Values(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 97) * 0.25f;
  return v;
}

class ElementwiseTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ElementwiseTest, AxpyMatchesCpu) {
  const size_t n = GetParam();
  std::vector<float> x = Values(n, 1.0f), y = Values(n, -3.0f);
  DeviceBuffer dx(x), dy(y);
  ASSERT_TRUE(Axpy(0.5f, dx.get(), dy.get(), n, nullptr).ok());
  ASSERT_TRUE(CudaStatus(cudaDeviceSynchronize(), "sync").ok());
  std::vector<float> got = dy.Read();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], std::fma(0.5f, x[i], y[i])) << "element " << i;
}

TEST_P(ElementwiseTest, ScaleMatchesCpu) {
  const size_t n = GetParam();
  std::vector<float> x = Values(n, 2.0f);
  DeviceBuffer dx(x), dy(std::vector<float>(n, 0.0f));
  ASSERT_TRUE(Scale(dx.get(), 0.125f, dy.get(), n, nullptr).ok());
  ASSERT_TRUE(CudaStatus(cudaDeviceSynchronize(), "sync").ok());
  std::vector<float> got = dy.Read();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i] * 0.125f) << "element " << i;
}

// 0, smaller than a block, not a multiple of one, and more than the grid covers at once.
INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseTest,
                         ::testing::Values(0, 1, 255, 1000, 4096 * 256 + 3));

TEST(ElementwiseArgsTest, RefusesBadArguments) {
  EXPECT_EQ(Axpy(1.0f, nullptr, nullptr, 4, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Scale(nullptr, 1.0f, nullptr, -1, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::engine::cuda
