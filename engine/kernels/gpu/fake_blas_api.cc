#include "engine/kernels/gpu/fake_blas_api.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bfloat16.h"
#include "common/status.h"
#include "engine/kernels/cpu/blas.h"

namespace lockstep::engine::gpu {
namespace {

// cuBLASLt's GELU epilogue (the tanh approximation).
float GeluTanh(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v *
                            (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

std::vector<float> Widen(const void* bf16, int64_t n) {
  const uint16_t* in = static_cast<const uint16_t*>(bf16);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
  return out;
}

}  // namespace

absl::Status FakeBlasApi::Gemm(const GemmArgs& args, CudaStream stream) {
  LS_RETURN_IF_ERROR(CheckGemm(args));
  if (args.m == 0 || args.n == 0) return absl::OkStatus();
  return ColumnMajor(ToColumnMajor(args), stream);
}

absl::Status FakeBlasApi::ColumnMajor(const ColumnMajorGemm& g, CudaStream stream) {
  const std::string call =
      absl::StrCat("FakeBlasApi::Gemm (rows=", g.rows, ", cols=", g.cols, ", depth=", g.depth, ")");
  // Column-major storage: A_cm is rows x depth (depth x rows transposed), B_cm depth x cols
  // (cols x depth), C_cm rows x cols.
  struct Operand {
    const char* name;
    const void* p;
    int64_t ld, stored_rows, stored_cols;
  };
  const Operand ops[] = {
      {"a", g.a, g.lda, g.trans_a ? g.depth : g.rows, g.trans_a ? g.rows : g.depth},
      {"b", g.b, g.ldb, g.trans_b ? g.cols : g.depth, g.trans_b ? g.depth : g.cols},
      {"c", g.c, g.ldc, g.rows, g.cols},
  };
  void* views[3];
  for (int i = 0; i < 3; ++i) {
    const Operand& o = ops[i];
    const int64_t minimum = std::max<int64_t>(1, o.stored_rows);
    if (o.ld < minimum) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": ld", o.name, " ", o.ld,
                                                     " is below the stored rows ", minimum,
                                                     " (cuBLAS refuses it)"));
    }
    if (o.ld != minimum) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": ld", o.name, " ", o.ld,
                                                     " is not packed (", minimum,
                                                     "); the fake supports packed operands only"));
    }
    const size_t element = i < 2 ? OperandBytes(g.operands) : sizeof(float);
    const size_t bytes = static_cast<size_t>(o.ld * o.stored_cols) * element;
    LS_ASSIGN_OR_RETURN(views[i], fake_->HostRange(o.p, bytes, call, o.name));
  }
  void* bias = nullptr;
  if (EpilogueHasBias(g.epilogue)) {
    LS_ASSIGN_OR_RETURN(bias, fake_->HostRange(g.bias, g.rows * sizeof(float), call, "bias"));
  }
  ++calls_;
  const ColumnMajorGemm p = g;
  return fake_->Launch(stream, "cublasLtMatmul", [p, views, bias] {
    const float* a = static_cast<const float*>(views[0]);
    const float* b = static_cast<const float*>(views[1]);
    float* c = static_cast<float*>(views[2]);
    std::vector<float> wide_a, wide_b;  // bf16 operands, widened exactly
    if (p.operands == GemmOperands::kBF16) {
      wide_a = Widen(views[0], p.rows * p.depth);
      wide_b = Widen(views[1], p.depth * p.cols);
      a = wide_a.data();
      b = wide_b.data();
    } else if (p.allow_tf32) {  // what tensor cores multiply: operands rounded to TF32
      wide_a.assign(a, a + p.rows * p.depth);
      wide_b.assign(b, b + p.depth * p.cols);
      for (float& x : wide_a) x = RoundToTf32(x);
      for (float& x : wide_b) x = RoundToTf32(x);
      a = wide_a.data();
      b = wide_b.data();
    }
    // C_cm stored column-major is C_cm^T row-major [cols, rows] = op_b(B)^T op_a(A)^T, and
    // B_cm stored column-major is op_b(B)^T row-major, transposed iff trans_b (likewise A).
    cpu::Gemm<float>(p.trans_b, p.trans_a, p.cols, p.rows, p.depth, p.alpha, b, a, p.beta, c);
    const float* bv = static_cast<const float*>(bias);
    for (int64_t j = 0; j < p.cols; ++j) {
      for (int64_t i = 0; i < p.rows; ++i) {
        float& x = c[i + j * p.ldc];
        if (bv != nullptr) x = x + bv[i];
        if (p.epilogue == Epilogue::kRelu || p.epilogue == Epilogue::kBiasRelu) {
          x = x > 0.f ? x : 0.f;
        } else if (p.epilogue == Epilogue::kGelu || p.epilogue == Epilogue::kBiasGelu) {
          x = GeluTanh(x);
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace lockstep::engine::gpu
