#include "engine/kernels/gpu/blas_api.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine::gpu {

bool EpilogueHasBias(Epilogue e) {
  return e == Epilogue::kBias || e == Epilogue::kBiasRelu || e == Epilogue::kBiasGelu;
}

const char* EpilogueName(Epilogue e) {
  switch (e) {
    case Epilogue::kNone:
      return "none";
    case Epilogue::kBias:
      return "bias";
    case Epilogue::kRelu:
      return "relu";
    case Epilogue::kBiasRelu:
      return "bias+relu";
    case Epilogue::kGelu:
      return "gelu";
    case Epilogue::kBiasGelu:
      return "bias+gelu";
  }
  return "unknown";
}

const char* GemmOperandsName(GemmOperands o) {
  switch (o) {
    case GemmOperands::kF32:
      return "f32";
    case GemmOperands::kBF16:
      return "bf16";
  }
  return "unknown";
}

size_t OperandBytes(GemmOperands o) { return o == GemmOperands::kBF16 ? 2 : 4; }

absl::Status CheckGemm(const GemmArgs& g) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasApi::Gemm (m=", g.m, ", n=", g.n, ", k=", g.k, "): ", what));
  };
  if (g.operands != GemmOperands::kF32 && g.operands != GemmOperands::kBF16) {
    return bad(absl::StrCat("operands ", static_cast<int>(g.operands), " are not f32 or bf16"));
  }
  if (g.m < 0 || g.n < 0 || g.k < 0) return bad("a dimension is negative");
  if (g.m * g.n > 0 && g.k == 0) return bad("k = 0 (an empty inner dimension) is not a product");
  if (g.m * g.n > 0 && g.c == nullptr) return bad("c is null");
  if (g.m * g.k > 0 && g.a == nullptr) return bad("a is null");
  if (g.k * g.n > 0 && g.b == nullptr) return bad("b is null");
  if (EpilogueHasBias(g.epilogue) && g.n > 0 && g.bias == nullptr) {
    return bad(absl::StrCat("the ", EpilogueName(g.epilogue), " epilogue needs a bias"));
  }
  if (!EpilogueHasBias(g.epilogue) && g.bias != nullptr) {
    return bad(absl::StrCat("a bias was given to the ", EpilogueName(g.epilogue), " epilogue"));
  }
  return absl::OkStatus();
}

ColumnMajorGemm ToColumnMajor(const GemmArgs& g) {
  ColumnMajorGemm c;
  c.trans_a = g.trans_b;
  c.trans_b = g.trans_a;
  c.rows = g.n;
  c.cols = g.m;
  c.depth = g.k;
  c.alpha = g.alpha;
  c.beta = g.beta;
  // Row-major B stored [k, n] (or [n, k] transposed) is column-major with ld its row length.
  c.a = g.b;
  c.lda = g.trans_b ? g.k : g.n;
  c.b = g.a;
  c.ldb = g.trans_a ? g.m : g.k;
  c.c = g.c;
  c.ldc = g.n;
  c.epilogue = g.epilogue;
  c.bias = g.bias;
  c.operands = g.operands;
  c.allow_tf32 = g.allow_tf32;
  if (c.lda < 1) c.lda = 1;
  if (c.ldb < 1) c.ldb = 1;
  if (c.ldc < 1) c.ldc = 1;
  return c;
}

GemmPlanKey GemmPlanKey::Of(const ColumnMajorGemm& g) {
  GemmPlanKey k;
  k.trans_a = g.trans_a;
  k.trans_b = g.trans_b;
  k.rows = g.rows;
  k.cols = g.cols;
  k.depth = g.depth;
  k.lda = g.lda;
  k.ldb = g.ldb;
  k.ldc = g.ldc;
  k.epilogue = g.epilogue;
  k.operands = g.operands;
  k.allow_tf32 = g.allow_tf32;
  return k;
}

}  // namespace lockstep::engine::gpu
