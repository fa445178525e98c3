// GpuKernels: the GPU device's f32 kernels as launches on a CudaApi stream over device
// buffers, behind an interface so that what calls them is tested without a GPU:
// EmulatedKernels runs the bodies (kernel_bodies.h) on the grid emulator over FakeCudaApi's
// memory, CudaKernels (--config=cuda) launches the same bodies as __global__ kernels. Every
// launch is enqueued and returns at once; the caller synchronises the stream. Buffers may be
// the same array where a kernel reads and writes element i only (Relu in place, Axpy's y).
//
// Errors at launch: INVALID_ARGUMENT naming the kernel for a negative count or a null buffer
// with elements; the emulator also refuses buffers outside an allocation. Errors while the
// kernel runs (a fault; in emulation, an element not written exactly once or an access out of
// bounds) are sticky and reported by the synchronisation, as CUDA does.
// Thread model: implementations are thread-safe; a stream is used by one thread at a time.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "common/cuda/cuda_api.h"
#include "engine/kernels/gpu/cnn_geometry.h"
#include "engine/kernels/gpu/optimizer_params.h"
#include "engine/kernels/gpu/seq_params.h"

namespace lockstep::engine::gpu {

class GpuKernels {
 public:
  virtual ~GpuKernels() = default;
  // y = a * x + y (one rounding: fmaf).
  virtual absl::Status Axpy(float a, const float* x, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Scale(const float* x, float scale, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Add(const float* a, const float* b, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Relu(const float* x, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status ReluGrad(const float* x, const float* dy, float* dx, int64_t n,
                                CudaStream s) = 0;
  // Row-major [rows, cols].
  virtual absl::Status SoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols,
                                   CudaStream s) = 0;
  // y has `rows` elements.
  virtual absl::Status RowSum(const float* x, float* y, int64_t rows, int64_t cols,
                              CudaStream s) = 0;
  // y[i] = x[i] rounded to bf16 (common/bfloat16.h: to nearest even, NaN stays NaN): the
  // operands of mixed-precision products (BlasApi's GemmOperands::kBF16).
  virtual absl::Status CastToBFloat16(const float* x, uint16_t* y, int64_t n, CudaStream s) = 0;
  // y[i] = x[i] widened to f32 (exact): BF16 compression's all-reduced gradients back into
  // their f32 tensors (distribute/device_bf16_codec.h). x and y must not overlap.
  virtual absl::Status CastFromBFloat16(const uint16_t* x, float* y, int64_t n, CudaStream s) = 0;
  // One variable's fused update: v and w (and m, s) updated in place.
  virtual absl::Status Momentum(const MomentumParams& p, const float* g, float* v, float* w,
                                int64_t n, CudaStream s) = 0;
  virtual absl::Status Adam(const AdamParams& p, const float* g, float* m, float* v, float* w,
                            int64_t n, CudaStream s) = 0;
  // Global-norm clipping on the device, no host round trip (kernel_bodies.h): SumSquares
  // writes kNormPartials f64 partial sums of x^2 (one call per gradient, each its own slice of
  // a partials buffer); ClipScale sums `count` partials into norm[0] (f64) and writes the
  // scale (f32) the update kernels read (MomentumParams::device_gradient_scale, ScaleByDevice).
  virtual absl::Status SumSquares(const float* x, int64_t n, double* partials, CudaStream s) = 0;
  virtual absl::Status ClipScale(const double* partials, int64_t count, double clipnorm,
                                 double* norm, float* scale, CudaStream s) = 0;
  // y = x * scale[0], scale a device float.
  virtual absl::Status ScaleByDevice(const float* x, const float* scale, float* y, int64_t n,
                                     CudaStream s) = 0;

  // x [rows, cols] + b [cols] broadcast over the rows.
  virtual absl::Status BiasAdd(const float* x, const float* b, float* y, int64_t rows, int64_t cols,
                               CudaStream s) = 0;
  // y[j] = sum over the rows of x[r, j] (y has `cols` elements).
  virtual absl::Status ColumnSum(const float* x, float* y, int64_t rows, int64_t cols,
                                 CudaStream s) = 0;
  // bad (one int64) = 1 + the first of `rows` integer labels (i64 when labels_i64, else i32)
  // outside [0, classes), 0 when every one is inside: the loss and accuracy nodes' label
  // check, read back with the step's results instead of copying the labels to the host.
  virtual absl::Status CheckLabels(const void* labels, bool labels_i64, int64_t* bad, int64_t rows,
                                   int64_t classes, CudaStream s) = 0;
  // Sparse softmax cross-entropy over logits [rows, classes] and integer labels [rows] (i64
  // when labels_i64, else i32; one outside [0, classes) is clamped into it, so reads stay in
  // the logits: CheckLabels reports it), smoothed by `eps`: loss (one float) = the mean; `terms` is
  // scratch of `rows` doubles.
  virtual absl::Status SoftmaxCrossEntropy(const float* logits, const void* labels, bool labels_i64,
                                           double* terms, float* loss, int64_t rows,
                                           int64_t classes, double eps, CudaStream s) = 0;
  // Its gradient with respect to the logits, times d_loss[0].
  virtual absl::Status SoftmaxCrossEntropyGrad(const float* logits, const void* labels,
                                               bool labels_i64, const float* d_loss, float* grad,
                                               int64_t rows, int64_t classes, float eps,
                                               CudaStream s) = 0;
  // rate (one float) = the fraction of rows whose first largest logit is the label's; `hits`
  // is scratch of `rows` int32.
  virtual absl::Status Accuracy(const float* logits, const void* labels, bool labels_i64,
                                int32_t* hits, float* rate, int64_t rows, int64_t classes,
                                CudaStream s) = 0;

  // Convolutional models (kernel_bodies_cnn.h): NHWC tensors under a WindowGeometry, batch
  // norm over x [rows, c] in BatchNormDims' groups (cnn_geometry.h). Launch errors as above,
  // plus INVALID_ARGUMENT for a geometry or dims that are not a shape (a negative size, a
  // stride or window < 1, groups that do not cover the rows).
  //
  // cols [w.rows(), w.cols()] = im2col of x [n, h, w, c] (0 where a window overhangs x).
  virtual absl::Status Im2Col(const float* x, const WindowGeometry& w, float* cols,
                              CudaStream s) = 0;
  // dx [n, h, w, c] (overwritten) = every column entry added into its input position.
  virtual absl::Status Col2Im(const float* cols, const WindowGeometry& w, float* dx,
                              CudaStream s) = 0;
  // y [n, oh, ow, c] = each window's maximum (0 for a window wholly in the padding).
  virtual absl::Status MaxPool(const float* x, const WindowGeometry& w, float* y, CudaStream s) = 0;
  // dx [n, h, w, c] (overwritten): each dy added to its window's first maximum.
  virtual absl::Status MaxPoolGrad(const float* x, const WindowGeometry& w, const float* dy,
                                   float* dx, CudaStream s) = 0;
  // y = gamma * (x - mean) * rstd + beta; stats [groups, 3, c] receives each group's mean,
  // variance and rstd: of its rows when training, else the moving ones (then one group).
  virtual absl::Status BatchNorm(const float* x, const float* gamma, const float* beta,
                                 const float* moving_mean, const float* moving_variance,
                                 const BatchNormDims& d, bool training, float epsilon, float* stats,
                                 float* y, CudaStream s) = 0;
  // The moving statistics' deltas (1 - momentum) * (mean of the groups' stats - moving).
  virtual absl::Status BatchNormMovingUpdates(const float* stats, const float* moving_mean,
                                              const float* moving_variance, const BatchNormDims& d,
                                              float momentum, float* delta_mean,
                                              float* delta_variance, CudaStream s) = 0;
  // The gradient: stats as BatchNorm computes them (recomputed), sums [groups, 2, c] scratch,
  // d_gamma and d_beta [c], dx like x (null: not wanted).
  virtual absl::Status BatchNormGrad(const float* x, const float* dy, const float* gamma,
                                     const float* moving_mean, const float* moving_variance,
                                     const BatchNormDims& d, bool training, float epsilon,
                                     float* stats, float* sums, float* d_gamma, float* d_beta,
                                     float* dx, CudaStream s) = 0;
  // Synchronized batch norm in training (engine/ops/batch_norm.cc): the per-channel partial
  // sums of this replica's `rows` rows of x [rows, c] (0: a phantom batch), in f64 in the CPU
  // kernel's order, which the op sums over the replicas on the host; then the normalization
  // and the gradient from the global batch's statistics.
  //
  // sums [c] = sum of x, or with `mean` [c] (f64, not null) the sum of (x - mean)^2.
  virtual absl::Status SyncBatchNormSum(const float* x, const double* mean, int64_t rows, int64_t c,
                                        double* sums, CudaStream s) = 0;
  // y [rows, c] = gamma * (x - mean) * rstd + beta with the given stats [3, c] (mean, variance,
  // rstd), as BatchNorm applies them.
  virtual absl::Status BatchNormApply(const float* x, const float* gamma, const float* beta,
                                      const float* stats, int64_t rows, int64_t c, float* y,
                                      CudaStream s) = 0;
  // sums [2, c] = sum dy, sum dy * xhat (f64) over `rows` rows, xhat from stats [3, c];
  // d_gamma, d_beta [c] = those sums in f32 (this replica's share).
  virtual absl::Status SyncBatchNormGradSums(const float* x, const float* dy, const float* stats,
                                             int64_t rows, int64_t c, double* sums, float* d_gamma,
                                             float* d_beta, CudaStream s) = 0;
  // dx [rows, c] = rstd * (dy * gamma - gamma * (mean_dy + xhat * mean_dyx)), means [2, c] =
  // mean_dy, mean_dyx over the global batch.
  virtual absl::Status SyncBatchNormInput(const float* x, const float* dy, const float* gamma,
                                          const float* stats, const float* means, int64_t rows,
                                          int64_t c, float* dx, CudaStream s) = 0;
  // Sequence models (kernel_bodies_seq.h): the ops of a Transformer, each the device side of
  // its CPU kernel in engine/ops/. Shapes as rows x cols are row-major.
  virtual absl::Status Activation(ActivationOp op, const float* x, float* y, int64_t n,
                                  CudaStream s) = 0;
  // SIGMOID and TANH read the output y, GELU the input x (the other may be null).
  virtual absl::Status ActivationGrad(ActivationOp op, const float* x, const float* y,
                                      const float* dy, float* dx, int64_t n, CudaStream s) = 0;
  virtual absl::Status Binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                              CudaStream s) = 0;
  // SOFTMAX's gradient from its output y.
  virtual absl::Status SoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                                   int64_t cols, CudaStream s) = 0;
  // gamma and beta have `cols` elements.
  virtual absl::Status LayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                                 int64_t rows, int64_t cols, float eps, CudaStream s) = 0;
  // `stats` is scratch of 2 * rows floats; dx, dgamma, dbeta are each null when not wanted.
  virtual absl::Status LayerNormGrad(const float* x, const float* gamma, const float* dy,
                                     float* stats, float* dx, float* dgamma, float* dbeta,
                                     int64_t rows, int64_t cols, float eps, CudaStream s) = 0;
  // SUM (mean = false) or MEAN of x over the plan's axes into y.
  virtual absl::Status Reduce(const ReducePlan& plan, bool mean, const float* x, float* y,
                              CudaStream s) = 0;
  virtual absl::Status ReduceGrad(const ReducePlan& plan, const float* dy, float* dx,
                                  CudaStream s) = 0;
  // y [outer, sum of widths] from the plan's inputs.
  virtual absl::Status Concat(const ConcatPlan& plan, float* y, CudaStream s) = 0;
  // dst [outer, width] = columns offset .. offset + width of src [outer, row].
  virtual absl::Status SliceColumns(const float* src, int64_t row, int64_t offset, float* dst,
                                    int64_t outer, int64_t width, CudaStream s) = 0;
  // idx (int64, `rows` elements): each row's first largest column.
  virtual absl::Status ArgmaxRows(const float* x, int64_t* idx, int64_t rows, int64_t cols,
                                  CudaStream s) = 0;
  // y [count, dim] = rows ids of table [vocab, dim]; ids in [0, vocab) (the caller checks:
  // a GPU would read outside the table).
  virtual absl::Status Gather(const void* ids, IndexType type, const float* table, float* y,
                              int64_t count, int64_t vocab, int64_t dim, CudaStream s) = 0;
  // dtable [vocab, dim]: the rows of dy [count, dim] summed by id, zero elsewhere.
  virtual absl::Status EmbeddingGrad(const void* ids, IndexType type, const float* dy,
                                     float* dtable, int64_t count, int64_t vocab, int64_t dim,
                                     CudaStream s) = 0;
  // y = keep ? x * scale : 0 with DROPOUT's Philox mask for `key` (also its gradient, x = dy).
  virtual absl::Status Dropout(uint64_t key, double rate, float scale, const float* x, float* y,
                               int64_t n, CudaStream s) = 0;
  // SELF_ATTENTION's layout changes (seq_params.h's HeadsLayout) and its masked softmax rows.
  virtual absl::Status RowsToHeads(const HeadsLayout& layout, const float* src, float* dst,
                                   CudaStream s) = 0;
  virtual absl::Status HeadsToRows(const HeadsLayout& layout, const float* src, float* dst,
                                   CudaStream s) = 0;
  virtual absl::Status AttentionSoftmax(const float* scores, float* probs, int64_t rows,
                                        int64_t time, bool causal, CudaStream s) = 0;
  virtual absl::Status AttentionSoftmaxGrad(const float* probs, const float* dprobs, float* dscores,
                                            int64_t rows, int64_t time, float scale,
                                            CudaStream s) = 0;
};

// The launch-time checks both implementations make: INVALID_ARGUMENT "<kernel>: ..." for
// n < 0 or a null buffer when n > 0.
absl::Status CheckLaunch(const char* kernel, int64_t n, std::initializer_list<const void*> buffers);
// The same for a kernel over `rows` x `cols` (INVALID_ARGUMENT for a negative one).
absl::Status CheckRows(const char* kernel, int64_t rows, int64_t cols,
                       std::initializer_list<const void*> buffers);
// INVALID_ARGUMENT "<kernel>: ..." for a geometry or dims that are not a shape (see above).
absl::Status CheckWindow(const char* kernel, const WindowGeometry& w);
absl::Status CheckBatchNorm(const char* kernel, const BatchNormDims& d);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_
