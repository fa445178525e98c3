// Device environments for device-generic engine tests (PyTorch's instantiate_device_type_tests):
// one test body, a type parameter Env that says where it runs. Env provides
//   static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make();
// and the DeviceEnv it makes owns whatever the device needs. CpuEnv is "/cpu:0"; FakeGpuEnv is
// "/gpu:0" on FakeCudaApi, the grid emulator (EmulatedKernels) and FakeBlasApi, so CPU CI runs
// every GPU instance; a requires-gpu test makes the same DeviceEnv over the real API, kernels
// and cuBLASLt (device_generic_cuda_test.cc).
//
// Ownership: a DeviceEnv owns its API, context, kernels and BLAS (declared in destruction
// order: BLAS and kernels, then the context, then the API). Thread model: one test thread.
#ifndef LOCKSTEP_ENGINE_DEVICE_TEST_ENV_H_
#define LOCKSTEP_ENGINE_DEVICE_TEST_ENV_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda/cuda_api.h"
#include "common/cuda/fake_cuda_api.h"
#include "common/status.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/device_tensor.h"
#include "engine/gpu/gpu_device.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/fake_blas_api.h"
#include "engine/tensor.h"

namespace lockstep::engine {

class DeviceEnv {
 public:
  virtual ~DeviceEnv() = default;
  virtual Device device() const = 0;
  // Null on the CPU.
  virtual const gpu::GpuDevice* gpu() const = 0;
  // A copy of a host tensor on the device (the tensor itself on the CPU).
  virtual absl::StatusOr<Tensor> ToDevice(const Tensor& host) = 0;
  // A host copy of a device tensor (the tensor itself on the CPU); synchronises.
  virtual absl::StatusOr<Tensor> ToHost(const Tensor& t) = 0;
  // A kernel's buffer on the device.
  virtual Tensor Allocate(DType dtype, const Shape& shape) = 0;

  absl::StatusOr<std::vector<Tensor>> ToDevice(const std::vector<Tensor>& host) {
    std::vector<Tensor> out;
    for (const Tensor& t : host) {
      if (!t.valid()) {
        out.emplace_back();
        continue;
      }
      LS_ASSIGN_OR_RETURN(Tensor d, ToDevice(t));
      out.push_back(std::move(d));
    }
    return out;
  }
  absl::StatusOr<std::vector<Tensor>> ToHost(const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) {
      if (!t.valid()) {
        out.emplace_back();
        continue;
      }
      LS_ASSIGN_OR_RETURN(Tensor h, ToHost(t));
      out.push_back(std::move(h));
    }
    return out;
  }
};

class CpuDeviceEnv final : public DeviceEnv {
 public:
  Device device() const override { return Device::Cpu(0); }
  const gpu::GpuDevice* gpu() const override { return nullptr; }
  absl::StatusOr<Tensor> ToDevice(const Tensor& host) override { return host; }
  absl::StatusOr<Tensor> ToHost(const Tensor& t) override { return t; }
  Tensor Allocate(DType dtype, const Shape& shape) override { return Tensor(dtype, shape); }
};

// A GPU over any CudaApi: the test's DeviceEnv for the fake and the real side alike.
class GpuDeviceEnv final : public DeviceEnv {
 public:
  GpuDeviceEnv(std::unique_ptr<CudaApi> api, std::unique_ptr<gpu::DeviceContext> context,
               std::unique_ptr<gpu::GpuKernels> kernels, std::unique_ptr<gpu::BlasApi> blas)
      : api_(std::move(api)),
        context_(std::move(context)),
        kernels_(std::move(kernels)),
        blas_(std::move(blas)) {
    handles_.context = context_.get();
    handles_.kernels = kernels_.get();
    handles_.blas = blas_.get();
  }
  Device device() const override { return handles_.device(); }
  const gpu::GpuDevice* gpu() const override { return &handles_; }
  absl::StatusOr<Tensor> ToDevice(const Tensor& host) override {
    LS_ASSIGN_OR_RETURN(Tensor t, gpu::CopyToDevice(*context_, host));
    // The host tensor may go once this returns.
    LS_RETURN_IF_ERROR(context_->Synchronize());
    return t;
  }
  absl::StatusOr<Tensor> ToHost(const Tensor& t) override { return gpu::CopyToHost(*context_, t); }
  Tensor Allocate(DType dtype, const Shape& shape) override {
    absl::StatusOr<Tensor> t = gpu::AllocateTensor(*context_, dtype, shape);
    return t.ok() ? *std::move(t) : Tensor();
  }
  gpu::DeviceContext& context() { return *context_; }

 private:
  std::unique_ptr<CudaApi> api_;
  std::unique_ptr<gpu::DeviceContext> context_;
  std::unique_ptr<gpu::GpuKernels> kernels_;
  std::unique_ptr<gpu::BlasApi> blas_;
  gpu::GpuDevice handles_;
};

struct CpuEnv {
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make() {
    return std::unique_ptr<DeviceEnv>(new CpuDeviceEnv());
  }
};

struct FakeGpuEnv {
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make() { return MakeWith({}); }
  // With the emulator's options (e.g. small grids, so that every grid-stride loop turns).
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> MakeWith(gpu::EmulatedKernels::Options grid) {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{256} << 20;
    LS_ASSIGN_OR_RETURN(std::unique_ptr<FakeCudaApi> fake, FakeCudaApi::Create(options));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceContext> context,
                        gpu::DeviceContext::Create(fake.get(), 0));
    auto kernels = std::make_unique<gpu::EmulatedKernels>(fake.get(), grid);
    auto blas = std::make_unique<gpu::FakeBlasApi>(fake.get());
    return std::unique_ptr<DeviceEnv>(
        new GpuDeviceEnv(std::move(fake), std::move(context), std::move(kernels), std::move(blas)));
  }
};

// The CPU-CI instantiations of the device-generic test bodies: "/cpu:0", the fake "/gpu:0"
// (FakeCudaApi, the grid emulator, FakeBlasApi), and the same fake with grids of at most 2
// blocks of 64 threads, so that every grid-stride loop of the kernels turns. On the fake the
// kernels do the CPU's arithmetic, so every comparison with the CPU is bit for bit.
struct BitwiseCpu : CpuEnv {
  static constexpr bool kBitwise = true;
};
struct BitwiseFakeGpu : FakeGpuEnv {
  static constexpr bool kBitwise = true;
};
struct BitwiseSmallGridFakeGpu {
  static constexpr bool kBitwise = true;
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make() {
    gpu::EmulatedKernels::Options grid;
    grid.seed = 7;
    grid.max_blocks = 2;
    grid.threads = 64;
    return FakeGpuEnv::MakeWith(grid);
  }
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_DEVICE_TEST_ENV_H_
