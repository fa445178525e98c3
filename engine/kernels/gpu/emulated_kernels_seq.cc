// EmulatedKernels' sequence-model launches (GpuKernels' "Sequence models" block): the bodies of
// kernel_bodies_seq.h on the grid emulator over FakeCudaApi's memory, as emulated_kernels.cc
// runs kernel_bodies.h. Each launch checks its arguments and buffers at the call and enqueues.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/grid_emulator.h"
#include "engine/kernels/gpu/kernel_bodies_seq.h"

namespace lockstep::engine::gpu {
namespace {

using A = EmulatedAccess;

// The fake's host view of `n` elements of T at `p`, which must lie in one allocation (null for
// no elements).
template <typename T>
absl::StatusOr<void*> ViewOf(FakeCudaApi* fake, const void* p, int64_t n, const char* kernel,
                             const char* name) {
  if (n == 0) return nullptr;
  return fake->HostRange(p, static_cast<size_t>(n) * sizeof(T),
                         absl::StrCat("Launch(", kernel, ")"), name);
}

// The view of `n` indices of `type` at `p`.
absl::StatusOr<void*> IndexView(FakeCudaApi* fake, const void* p, IndexType type, int64_t n,
                                const char* kernel) {
  switch (type) {
    case IndexType::kI32:
      return ViewOf<int32_t>(fake, p, n, kernel, "ids");
    case IndexType::kI64:
      return ViewOf<int64_t>(fake, p, n, kernel, "ids");
    case IndexType::kF32:
      break;
  }
  return ViewOf<float>(fake, p, n, kernel, "ids");
}

// Runs K<A, L> with L the ids' element type: K{ids, rest...}.
template <template <class, typename> class K, typename... Rest>
absl::Status RunIndexed(GridEmulator& emu, LaunchShape shape, IndexType type, void* ids,
                        int64_t count, Rest... rest) {
  switch (type) {
    case IndexType::kI32:
      return emu.Run(shape, K<A, int32_t>{emu.In<int32_t>(ids, count, "ids"), rest...});
    case IndexType::kI64:
      return emu.Run(shape, K<A, int64_t>{emu.In<int64_t>(ids, count, "ids"), rest...});
    case IndexType::kF32:
      break;
  }
  return emu.Run(shape, K<A, float>{emu.In<float>(ids, count, "ids"), rest...});
}

absl::Status CheckPlanRank(const char* kernel, int rank) {
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": rank ", rank, " is outside [0, ", kMaxRank, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

template <class Body>
absl::Status EmulatedKernels::Enqueue(const char* kernel, CudaStream s, Body body) {
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, kernel, [=] {
    GridEmulator emu(kernel, seed);
    return body(emu);
  });
}

absl::Status EmulatedKernels::Activation(ActivationOp op, const float* x, float* y, int64_t n,
                                         CudaStream s) {
  const char* k = "Activation";
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(
        shape, ActivationKernel<A>{op, emu.In<float>(xv, n, "x"), emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::ActivationGrad(ActivationOp op, const float* x, const float* y,
                                             const float* dy, float* dx, int64_t n, CudaStream s) {
  const char* k = "ActivationGrad";
  const float* read = op == ActivationOp::kGelu ? x : y;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {read, dy, dx}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* rv, ViewOf<float>(fake_, read, n, k, "x or y"));
  LS_ASSIGN_OR_RETURN(void* dyv, ViewOf<float>(fake_, dy, n, k, "dy"));
  LS_ASSIGN_OR_RETURN(void* dxv, ViewOf<float>(fake_, dx, n, k, "dx"));
  const LaunchShape shape = Elementwise(n);
  const bool gelu = op == ActivationOp::kGelu;
  return Enqueue(k, s, [=](GridEmulator& emu) {
    // The operand the op does not read gets an empty accessor: a read of it is an error.
    auto in = emu.In<float>(rv, n, gelu ? "x" : "y");
    auto none = emu.In<float>(nullptr, 0, gelu ? "y" : "x");
    return emu.Run(shape, ActivationGradKernel<A>{op, gelu ? in : none, gelu ? none : in,
                                                  emu.In<float>(dyv, n, "dy"),
                                                  emu.Out<float>(dxv, n, "dx"), n});
  });
}

absl::Status EmulatedKernels::Binary(BinaryOp op, const float* a, const float* b, float* y,
                                     int64_t n, CudaStream s) {
  const char* k = "Binary";
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {a, b, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* av, ViewOf<float>(fake_, a, n, k, "a"));
  LS_ASSIGN_OR_RETURN(void* bv, ViewOf<float>(fake_, b, n, k, "b"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape, BinaryKernel<A>{op, emu.In<float>(av, n, "a"), emu.In<float>(bv, n, "b"),
                                          emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::SoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                                          int64_t cols, CudaStream s) {
  const char* k = "SoftmaxGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, cols, {y, dy, dx}));
  const int64_t n = rows * cols;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  LS_ASSIGN_OR_RETURN(void* dyv, ViewOf<float>(fake_, dy, n, k, "dy"));
  LS_ASSIGN_OR_RETURN(void* dxv, ViewOf<float>(fake_, dx, n, k, "dx"));
  const LaunchShape shape = Elementwise(rows);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   SoftmaxGradRowsKernel<A>{emu.In<float>(yv, n, "y"), emu.In<float>(dyv, n, "dy"),
                                            emu.Out<float>(dxv, n, "dx"), rows, cols});
  });
}

absl::Status EmulatedKernels::LayerNorm(const float* x, const float* gamma, const float* beta,
                                        float* y, int64_t rows, int64_t cols, float eps,
                                        CudaStream s) {
  const char* k = "LayerNorm";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, cols, {x, gamma, beta, y}));
  const int64_t n = rows * cols;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* gv, ViewOf<float>(fake_, gamma, cols, k, "gamma"));
  LS_ASSIGN_OR_RETURN(void* bv, ViewOf<float>(fake_, beta, cols, k, "beta"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise(rows);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(
        shape, LayerNormRowsKernel<A>{emu.In<float>(xv, n, "x"), emu.In<float>(gv, cols, "gamma"),
                                      emu.In<float>(bv, cols, "beta"), emu.Out<float>(yv, n, "y"),
                                      rows, cols, eps});
  });
}

absl::Status EmulatedKernels::LayerNormGrad(const float* x, const float* gamma, const float* dy,
                                            float* stats, float* dx, float* dgamma, float* dbeta,
                                            int64_t rows, int64_t cols, float eps, CudaStream s) {
  const char* k = "LayerNormGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, cols, {x, gamma, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 2 * rows, {stats}));
  const int64_t n = rows * cols;
  if (n == 0) return absl::OkStatus();
  const int64_t dx_n = dx != nullptr ? n : 0, dg_n = dgamma != nullptr ? cols : 0,
                db_n = dbeta != nullptr ? cols : 0;
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* gv, ViewOf<float>(fake_, gamma, cols, k, "gamma"));
  LS_ASSIGN_OR_RETURN(void* dyv, ViewOf<float>(fake_, dy, n, k, "dy"));
  LS_ASSIGN_OR_RETURN(void* sv, ViewOf<float>(fake_, stats, 2 * rows, k, "stats"));
  LS_ASSIGN_OR_RETURN(void* dxv, ViewOf<float>(fake_, dx, dx_n, k, "dx"));
  LS_ASSIGN_OR_RETURN(void* dgv, ViewOf<float>(fake_, dgamma, dg_n, k, "dgamma"));
  LS_ASSIGN_OR_RETURN(void* dbv, ViewOf<float>(fake_, dbeta, db_n, k, "dbeta"));
  const LaunchShape row_shape = Elementwise(rows);
  LS_RETURN_IF_ERROR(Enqueue("LayerNormRowGrad", s, [=](GridEmulator& emu) {
    return emu.Run(row_shape,
                   LayerNormRowGradKernel<A>{
                       emu.In<float>(xv, n, "x"), emu.In<float>(gv, cols, "gamma"),
                       emu.In<float>(dyv, n, "dy"), emu.Out<float>(sv, 2 * rows, "stats"),
                       emu.Out<float>(dxv, dx_n, "dx"), rows, cols, eps, dx_n > 0});
  }));
  if (dg_n == 0 && db_n == 0) return absl::OkStatus();
  const LaunchShape col_shape = Elementwise(cols);
  return Enqueue("LayerNormParamGrad", s, [=](GridEmulator& emu) {
    return emu.Run(col_shape,
                   LayerNormParamGradKernel<A>{
                       emu.In<float>(xv, n, "x"), emu.In<float>(dyv, n, "dy"),
                       emu.In<float>(sv, 2 * rows, "stats"), emu.Out<float>(dgv, dg_n, "dgamma"),
                       emu.Out<float>(dbv, db_n, "dbeta"), rows, cols, dg_n > 0, db_n > 0});
  });
}

absl::Status EmulatedKernels::Reduce(const ReducePlan& plan, bool mean, const float* x, float* y,
                                     CudaStream s) {
  const char* k = "Reduce";
  LS_RETURN_IF_ERROR(CheckPlanRank(k, plan.rank));
  int64_t n = 1, outputs = 1;
  for (int d = 0; d < plan.rank; ++d) {
    n *= plan.dims[d];
    if (!plan.reduced[d]) outputs *= plan.dims[d];
  }
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, outputs, {y}));
  if (outputs == 0) return absl::OkStatus();
  const int64_t per_output = n / outputs;
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, outputs, k, "y"));
  const LaunchShape shape = Elementwise(outputs);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(
        shape, ReduceKernel<A>{plan, emu.In<float>(xv, n, "x"), emu.Out<float>(yv, outputs, "y"),
                               outputs, per_output, mean});
  });
}

absl::Status EmulatedKernels::ReduceGrad(const ReducePlan& plan, const float* dy, float* dx,
                                         CudaStream s) {
  const char* k = "ReduceGrad";
  LS_RETURN_IF_ERROR(CheckPlanRank(k, plan.rank));
  int64_t n = 1, outputs = 1;
  for (int d = 0; d < plan.rank; ++d) {
    n *= plan.dims[d];
    if (!plan.reduced[d]) outputs *= plan.dims[d];
  }
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {dy, dx}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* dyv, ViewOf<float>(fake_, dy, outputs, k, "dy"));
  LS_ASSIGN_OR_RETURN(void* dxv, ViewOf<float>(fake_, dx, n, k, "dx"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape, ReduceGradKernel<A>{plan, emu.In<float>(dyv, outputs, "dy"),
                                              emu.Out<float>(dxv, n, "dx"), n});
  });
}

absl::Status EmulatedKernels::Concat(const ConcatPlan& plan, float* y, CudaStream s) {
  const char* k = "Concat";
  if (plan.inputs < 1 || plan.inputs > kMaxConcatInputs || plan.outer < 0) {
    return absl::InvalidArgumentError(absl::StrCat(k, ": ", plan.inputs, " inputs of ", plan.outer,
                                                   " rows (1 to ", kMaxConcatInputs, " inputs)"));
  }
  int64_t row = 0;
  void* views[kMaxConcatInputs] = {};
  for (int i = 0; i < plan.inputs; ++i) {
    const int64_t len = plan.outer * plan.width[i];
    LS_RETURN_IF_ERROR(CheckLaunch(k, len, {plan.data[i]}));
    LS_ASSIGN_OR_RETURN(views[i], ViewOf<float>(fake_, plan.data[i], len, k, "input"));
    row += plan.width[i];
  }
  const int64_t n = plan.outer * row;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise(n);
  std::vector<void*> inputs(views, views + plan.inputs);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    ConcatKernel<A> kernel{};
    for (int i = 0; i < plan.inputs; ++i) {
      kernel.in[i] = emu.In<float>(inputs[i], plan.outer * plan.width[i], "input");
      kernel.width[i] = plan.width[i];
    }
    kernel.inputs = plan.inputs;
    kernel.row = row;
    kernel.y = emu.Out<float>(yv, n, "y");
    kernel.n = n;
    return emu.Run(shape, kernel);
  });
}

absl::Status EmulatedKernels::SliceColumns(const float* src, int64_t row, int64_t offset,
                                           float* dst, int64_t outer, int64_t width, CudaStream s) {
  const char* k = "SliceColumns";
  LS_RETURN_IF_ERROR(CheckRows(k, outer, width, {src, dst}));
  if (offset < 0 || offset + width > row) {
    return absl::InvalidArgumentError(
        absl::StrCat(k, ": columns [", offset, ", ", offset + width, ") of rows of ", row));
  }
  const int64_t n = outer * width;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* sv, ViewOf<float>(fake_, src, outer * row, k, "src"));
  LS_ASSIGN_OR_RETURN(void* dv, ViewOf<float>(fake_, dst, n, k, "dst"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   SliceColumnsKernel<A>{emu.In<float>(sv, outer * row, "src"),
                                         emu.Out<float>(dv, n, "dst"), row, offset, width, n});
  });
}

absl::Status EmulatedKernels::ArgmaxRows(const float* x, int64_t* idx, int64_t rows, int64_t cols,
                                         CudaStream s) {
  const char* k = "ArgmaxRows";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, cols, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {idx}));
  if (rows * cols == 0) return absl::OkStatus();
  const int64_t n = rows * cols;
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* iv, ViewOf<int64_t>(fake_, idx, rows, k, "idx"));
  const LaunchShape shape = Elementwise(rows);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape, ArgmaxRowsKernel<A>{emu.In<float>(xv, n, "x"),
                                              emu.Out<int64_t>(iv, rows, "idx"), rows, cols});
  });
}

absl::Status EmulatedKernels::Gather(const void* ids, IndexType type, const float* table, float* y,
                                     int64_t count, int64_t vocab, int64_t dim, CudaStream s) {
  const char* k = "Gather";
  LS_RETURN_IF_ERROR(CheckRows(k, vocab, dim, {table}));
  LS_RETURN_IF_ERROR(CheckRows(k, count, dim, {y}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, count, {ids}));
  const int64_t n = count * dim;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* iv, IndexView(fake_, ids, type, count, k));
  LS_ASSIGN_OR_RETURN(void* tv, ViewOf<float>(fake_, table, vocab * dim, k, "table"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return RunIndexed<GatherKernel>(emu, shape, type, iv, count,
                                    emu.In<float>(tv, vocab * dim, "table"),
                                    emu.Out<float>(yv, n, "y"), n, dim);
  });
}

absl::Status EmulatedKernels::EmbeddingGrad(const void* ids, IndexType type, const float* dy,
                                            float* dtable, int64_t count, int64_t vocab,
                                            int64_t dim, CudaStream s) {
  const char* k = "EmbeddingGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, vocab, dim, {dtable}));
  LS_RETURN_IF_ERROR(CheckRows(k, count, dim, {dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, count, {ids}));
  const int64_t n = vocab * dim;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* iv, IndexView(fake_, ids, type, count, k));
  LS_ASSIGN_OR_RETURN(void* dyv, ViewOf<float>(fake_, dy, count * dim, k, "dy"));
  LS_ASSIGN_OR_RETURN(void* tv, ViewOf<float>(fake_, dtable, n, k, "dtable"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return RunIndexed<EmbeddingGradKernel>(emu, shape, type, iv, count,
                                           emu.In<float>(dyv, count * dim, "dy"),
                                           emu.Out<float>(tv, n, "dtable"), count, n, dim);
  });
}

absl::Status EmulatedKernels::Dropout(uint64_t key, double rate, float scale, const float* x,
                                      float* y, int64_t n, CudaStream s) {
  const char* k = "Dropout";
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, ViewOf<float>(fake_, x, n, k, "x"));
  LS_ASSIGN_OR_RETURN(void* yv, ViewOf<float>(fake_, y, n, k, "y"));
  const LaunchShape shape = Elementwise((n + 3) / 4);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape, DropoutKernel<A>{key, rate, scale, emu.In<float>(xv, n, "x"),
                                           emu.Out<float>(yv, n, "y"), n});
  });
}

template <template <class> class K>
absl::Status EmulatedKernels::Relayout(const char* k, const HeadsLayout& layout, const float* src,
                                       float* dst, CudaStream s) {
  const int64_t n = layout.elements();
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {src, dst}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* sv, ViewOf<float>(fake_, src, n, k, "src"));
  LS_ASSIGN_OR_RETURN(void* dv, ViewOf<float>(fake_, dst, n, k, "dst"));
  const LaunchShape shape = Elementwise(n);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   K<A>{layout, emu.In<float>(sv, n, "src"), emu.Out<float>(dv, n, "dst"), n});
  });
}

absl::Status EmulatedKernels::RowsToHeads(const HeadsLayout& layout, const float* src, float* dst,
                                          CudaStream s) {
  return Relayout<RowsToHeadsKernel>("RowsToHeads", layout, src, dst, s);
}

absl::Status EmulatedKernels::HeadsToRows(const HeadsLayout& layout, const float* src, float* dst,
                                          CudaStream s) {
  return Relayout<HeadsToRowsKernel>("HeadsToRows", layout, src, dst, s);
}

absl::Status EmulatedKernels::AttentionSoftmax(const float* scores, float* probs, int64_t rows,
                                               int64_t time, bool causal, CudaStream s) {
  const char* k = "AttentionSoftmax";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, time, {scores, probs}));
  const int64_t n = rows * time;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* sv, ViewOf<float>(fake_, scores, n, k, "scores"));
  LS_ASSIGN_OR_RETURN(void* pv, ViewOf<float>(fake_, probs, n, k, "probs"));
  const LaunchShape shape = Elementwise(rows);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   AttentionSoftmaxKernel<A>{emu.In<float>(sv, n, "scores"),
                                             emu.Out<float>(pv, n, "probs"), rows, time, causal});
  });
}

absl::Status EmulatedKernels::AttentionSoftmaxGrad(const float* probs, const float* dprobs,
                                                   float* dscores, int64_t rows, int64_t time,
                                                   float scale, CudaStream s) {
  const char* k = "AttentionSoftmaxGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, time, {probs, dprobs, dscores}));
  const int64_t n = rows * time;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* pv, ViewOf<float>(fake_, probs, n, k, "probs"));
  LS_ASSIGN_OR_RETURN(void* dpv, ViewOf<float>(fake_, dprobs, n, k, "dprobs"));
  LS_ASSIGN_OR_RETURN(void* dsv, ViewOf<float>(fake_, dscores, n, k, "dscores"));
  const LaunchShape shape = Elementwise(rows);
  return Enqueue(k, s, [=](GridEmulator& emu) {
    return emu.Run(shape, AttentionSoftmaxGradKernel<A>{
                              emu.In<float>(pv, n, "probs"), emu.In<float>(dpv, n, "dprobs"),
                              emu.Out<float>(dsv, n, "dscores"), rows, time, scale});
  });
}

}  // namespace lockstep::engine::gpu
