// EmulatedKernels: GpuKernels on FakeCudaApi. Each launch checks its buffers against the
// fake's allocations and enqueues the kernel body (kernel_bodies.h) on the stream; when the
// stream runs it, the grid emulator (grid_emulator.h) runs every (block, thread) over the
// fake's host view of the memory, in an order drawn from a per-launch seed, and a kernel that
// does not write each output element exactly once faults (a sticky error the synchronisation
// reports). Options shrink the grid so that tests cover the grid-stride loops.
// Ownership: borrows the fake, which must outlive it. Thread model: thread-safe.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_EMULATED_KERNELS_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_EMULATED_KERNELS_H_

#include <atomic>

#include "common/cuda/fake_cuda_api.h"
#include "engine/kernels/gpu/gpu_kernels.h"
#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

class EmulatedKernels final : public GpuKernels {
 public:
  struct Options {
    uint64_t seed = 1;
    int max_blocks = kMaxBlocks;     // grids are at most this many blocks
    int threads = kThreadsPerBlock;  // per block (a multiple of 32)
  };
  EmulatedKernels(FakeCudaApi* fake, Options options) : fake_(fake), options_(options) {}
  explicit EmulatedKernels(FakeCudaApi* fake) : EmulatedKernels(fake, Options()) {}

  absl::Status Axpy(float a, const float* x, float* y, int64_t n, CudaStream s) override;
  absl::Status CastToBFloat16(const float* x, uint16_t* y, int64_t n, CudaStream s) override;
  absl::Status CastFromBFloat16(const uint16_t* x, float* y, int64_t n, CudaStream s) override;
  absl::Status Scale(const float* x, float scale, float* y, int64_t n, CudaStream s) override;
  absl::Status Add(const float* a, const float* b, float* y, int64_t n, CudaStream s) override;
  absl::Status Relu(const float* x, float* y, int64_t n, CudaStream s) override;
  absl::Status ReluGrad(const float* x, const float* dy, float* dx, int64_t n,
                        CudaStream s) override;
  absl::Status SoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols,
                           CudaStream s) override;
  absl::Status RowSum(const float* x, float* y, int64_t rows, int64_t cols, CudaStream s) override;
  absl::Status Momentum(const MomentumParams& p, const float* g, float* v, float* w, int64_t n,
                        CudaStream s) override;
  absl::Status Adam(const AdamParams& p, const float* g, float* m, float* v, float* w, int64_t n,
                    CudaStream s) override;
  absl::Status SumSquares(const float* x, int64_t n, double* partials, CudaStream s) override;
  absl::Status ClipScale(const double* partials, int64_t count, double clipnorm, double* norm,
                         float* scale, CudaStream s) override;
  absl::Status ScaleByDevice(const float* x, const float* scale, float* y, int64_t n,
                             CudaStream s) override;

  absl::Status BiasAdd(const float* x, const float* b, float* y, int64_t rows, int64_t cols,
                       CudaStream s) override;
  absl::Status ColumnSum(const float* x, float* y, int64_t rows, int64_t cols,
                         CudaStream s) override;
  absl::Status CheckLabels(const void* labels, bool labels_i64, int64_t* bad, int64_t rows,
                           int64_t classes, CudaStream s) override;
  absl::Status SoftmaxCrossEntropy(const float* logits, const void* labels, bool labels_i64,
                                   double* terms, float* loss, int64_t rows, int64_t classes,
                                   double eps, CudaStream s) override;
  absl::Status SoftmaxCrossEntropyGrad(const float* logits, const void* labels, bool labels_i64,
                                       const float* d_loss, float* grad, int64_t rows,
                                       int64_t classes, float eps, CudaStream s) override;
  absl::Status Accuracy(const float* logits, const void* labels, bool labels_i64, int32_t* hits,
                        float* rate, int64_t rows, int64_t classes, CudaStream s) override;

  // Convolutional models (emulated_kernels_cnn.cc).
  absl::Status Im2Col(const float* x, const WindowGeometry& w, float* cols, CudaStream s) override;
  absl::Status Col2Im(const float* cols, const WindowGeometry& w, float* dx, CudaStream s) override;
  absl::Status MaxPool(const float* x, const WindowGeometry& w, float* y, CudaStream s) override;
  absl::Status MaxPoolGrad(const float* x, const WindowGeometry& w, const float* dy, float* dx,
                           CudaStream s) override;
  absl::Status BatchNorm(const float* x, const float* gamma, const float* beta,
                         const float* moving_mean, const float* moving_variance,
                         const BatchNormDims& d, bool training, float epsilon, float* stats,
                         float* y, CudaStream s) override;
  absl::Status BatchNormMovingUpdates(const float* stats, const float* moving_mean,
                                      const float* moving_variance, const BatchNormDims& d,
                                      float momentum, float* delta_mean, float* delta_variance,
                                      CudaStream s) override;
  absl::Status BatchNormGrad(const float* x, const float* dy, const float* gamma,
                             const float* moving_mean, const float* moving_variance,
                             const BatchNormDims& d, bool training, float epsilon, float* stats,
                             float* sums, float* d_gamma, float* d_beta, float* dx,
                             CudaStream s) override;
  absl::Status SyncBatchNormSum(const float* x, const double* mean, int64_t rows, int64_t c,
                                double* sums, CudaStream s) override;
  absl::Status BatchNormApply(const float* x, const float* gamma, const float* beta,
                              const float* stats, int64_t rows, int64_t c, float* y,
                              CudaStream s) override;
  absl::Status SyncBatchNormGradSums(const float* x, const float* dy, const float* stats,
                                     int64_t rows, int64_t c, double* sums, float* d_gamma,
                                     float* d_beta, CudaStream s) override;
  absl::Status SyncBatchNormInput(const float* x, const float* dy, const float* gamma,
                                  const float* stats, const float* means, int64_t rows, int64_t c,
                                  float* dx, CudaStream s) override;

 private:
  LaunchShape Elementwise(int64_t n) const;
  LaunchShape Rows(int64_t rows) const;

  FakeCudaApi* const fake_;
  const Options options_;
  std::atomic<uint64_t> launches_{0};  // each launch's seed: options_.seed + its number

 public:
  // Sequence models (emulated_kernels_seq.cc)
  absl::Status Activation(ActivationOp op, const float* x, float* y, int64_t n,
                          CudaStream s) override;
  absl::Status ActivationGrad(ActivationOp op, const float* x, const float* y, const float* dy,
                              float* dx, int64_t n, CudaStream s) override;
  absl::Status Binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                      CudaStream s) override;
  absl::Status SoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                           CudaStream s) override;
  absl::Status LayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                         int64_t rows, int64_t cols, float eps, CudaStream s) override;
  absl::Status LayerNormGrad(const float* x, const float* gamma, const float* dy, float* stats,
                             float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                             float eps, CudaStream s) override;
  absl::Status Reduce(const ReducePlan& plan, bool mean, const float* x, float* y,
                      CudaStream s) override;
  absl::Status ReduceGrad(const ReducePlan& plan, const float* dy, float* dx,
                          CudaStream s) override;
  absl::Status Concat(const ConcatPlan& plan, float* y, CudaStream s) override;
  absl::Status SliceColumns(const float* src, int64_t row, int64_t offset, float* dst,
                            int64_t outer, int64_t width, CudaStream s) override;
  absl::Status ArgmaxRows(const float* x, int64_t* idx, int64_t rows, int64_t cols,
                          CudaStream s) override;
  absl::Status Gather(const void* ids, IndexType type, const float* table, float* y, int64_t count,
                      int64_t vocab, int64_t dim, CudaStream s) override;
  absl::Status EmbeddingGrad(const void* ids, IndexType type, const float* dy, float* dtable,
                             int64_t count, int64_t vocab, int64_t dim, CudaStream s) override;
  absl::Status Dropout(uint64_t key, double rate, float scale, const float* x, float* y, int64_t n,
                       CudaStream s) override;
  absl::Status RowsToHeads(const HeadsLayout& layout, const float* src, float* dst,
                           CudaStream s) override;
  absl::Status HeadsToRows(const HeadsLayout& layout, const float* src, float* dst,
                           CudaStream s) override;
  absl::Status AttentionSoftmax(const float* scores, float* probs, int64_t rows, int64_t time,
                                bool causal, CudaStream s) override;
  absl::Status AttentionSoftmaxGrad(const float* probs, const float* dprobs, float* dscores,
                                    int64_t rows, int64_t time, float scale, CudaStream s) override;

 private:
  // Sequence models' launches (emulated_kernels_seq.cc): `body(GridEmulator&)` runs the kernel
  // on the stream with the next launch's seed.
  template <class Body>
  absl::Status Enqueue(const char* kernel, CudaStream s, Body body);
  // RowsToHeads and HeadsToRows: kernel body K over the layout's elements.
  template <template <class> class K>
  absl::Status Relayout(const char* kernel, const HeadsLayout& layout, const float* src, float* dst,
                        CudaStream s);
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_EMULATED_KERNELS_H_
