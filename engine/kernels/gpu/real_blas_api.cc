#include "engine/kernels/gpu/real_blas_api.h"

#include <cublasLt.h>

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::engine::gpu {

// The cuBLASLt entry points, resolved from the library (decltype names their types only).
struct RealBlasApi::Functions {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

namespace {

// The one place where cuBLAS statuses become absl::Status.
absl::Status Check(decltype(&cublasLtGetStatusName) name, cublasStatus_t status,
                   absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuBLASLt ", call, ": ",
                                          name != nullptr ? name(status) : "", " (status ",
                                          static_cast<int>(status), ")"));
}

cublasLtEpilogue_t Native(Epilogue e) {
  switch (e) {
    case Epilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kRelu:
      return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::kBiasRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::kGelu:
      return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

template <typename F>
absl::Status Resolve(const SharedLibrary& lib, const char* name, F* out) {
  LS_ASSIGN_OR_RETURN(*out, lib.Function<std::remove_pointer_t<F>>(name));
  return absl::OkStatus();
}

}  // namespace

// One product's descriptors, layouts and algorithm (GemmPlanKey), made once and reused.
struct RealBlasApi::Plan {
  const Functions* f = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  ~Plan() {
    if (desc) f->desc_destroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c}) {
      if (l) f->layout_destroy(l);
    }
  }
};

absl::StatusOr<std::unique_ptr<RealBlasApi>> RealBlasApi::Create(CudaApi* api, Options options) {
  absl::StatusOr<std::unique_ptr<SharedLibrary>> lib =
      SharedLibrary::Open(kCublasLtLibrary, "GPU matrix products (cuBLASLt)");
  if (!lib.ok()) return absl::UnavailableError(lib.status().message());
  auto f = std::make_unique<Functions>();
  const SharedLibrary& l = **lib;
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtCreate", &f->create));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtDestroy", &f->destroy));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtGetStatusName", &f->status_name));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulDescCreate", &f->desc_create));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulDescDestroy", &f->desc_destroy));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulDescSetAttribute", &f->desc_set));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatrixLayoutCreate", &f->layout_create));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatrixLayoutDestroy", &f->layout_destroy));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulPreferenceCreate", &f->pref_create));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulPreferenceDestroy", &f->pref_destroy));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulPreferenceSetAttribute", &f->pref_set));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmulAlgoGetHeuristic", &f->heuristic));
  LS_RETURN_IF_ERROR(Resolve(l, "cublasLtMatmul", &f->matmul));
  cublasLtHandle_t handle = nullptr;
  LS_RETURN_IF_ERROR(Check(f->status_name, f->create(&handle), "cublasLtCreate"));
  absl::StatusOr<void*> workspace = api->Malloc(options.workspace_bytes);
  if (!workspace.ok()) {
    f->destroy(handle);
    return workspace.status();
  }
  return std::unique_ptr<RealBlasApi>(
      new RealBlasApi(api, options, *std::move(lib), std::move(f), handle, *workspace));
}

RealBlasApi::RealBlasApi(CudaApi* api, Options options, std::unique_ptr<SharedLibrary> library,
                         std::unique_ptr<Functions> f, void* handle, void* workspace)
    : api_(api),
      options_(options),
      library_(std::move(library)),
      f_(std::move(f)),
      handle_(handle),
      workspace_(workspace) {}

RealBlasApi::~RealBlasApi() {
  {
    absl::MutexLock lock(&mu_);
    plans_.clear();  // their descriptors before the handle
  }
  (void)api_->Free(workspace_);
  f_->destroy(static_cast<cublasLtHandle_t>(handle_));
}

absl::StatusOr<std::unique_ptr<RealBlasApi::Plan>> RealBlasApi::MakePlan(
    const ColumnMajorGemm& g) const {
  auto check = [&](cublasStatus_t s, absl::string_view call) {
    return Check(f_->status_name, s, call);
  };
  auto plan = std::make_unique<Plan>();
  plan->f = f_.get();
  // bf16 operands: tensor-core products accumulated in f32 (CUBLAS_COMPUTE_32F), C in f32.
  const bool bf16 = g.operands == GemmOperands::kBF16;
  const cudaDataType_t operand_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      g.allow_tf32 && !bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LS_RETURN_IF_ERROR(check(f_->desc_create(&plan->desc, compute, CUDA_R_32F), "MatmulDescCreate"));
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LS_RETURN_IF_ERROR(check(
      f_->desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "set TRANSA"));
  LS_RETURN_IF_ERROR(check(
      f_->desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "set TRANSB"));
  const cublasLtEpilogue_t epilogue = Native(g.epilogue);
  LS_RETURN_IF_ERROR(
      check(f_->desc_set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
            "set EPILOGUE"));
  if (g.bias != nullptr) {  // the heuristic sees a bias; each call sets its own (Gemm)
    const void* bias = g.bias;
    LS_RETURN_IF_ERROR(
        check(f_->desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
              "set BIAS_POINTER"));
  }
  // Stored shapes, column-major.
  LS_RETURN_IF_ERROR(check(f_->layout_create(&plan->a, operand_type, g.trans_a ? g.depth : g.rows,
                                             g.trans_a ? g.rows : g.depth, g.lda),
                           "MatrixLayoutCreate(A)"));
  LS_RETURN_IF_ERROR(check(f_->layout_create(&plan->b, operand_type, g.trans_b ? g.cols : g.depth,
                                             g.trans_b ? g.depth : g.cols, g.ldb),
                           "MatrixLayoutCreate(B)"));
  LS_RETURN_IF_ERROR(check(f_->layout_create(&plan->c, CUDA_R_32F, g.rows, g.cols, g.ldc),
                           "MatrixLayoutCreate(C)"));
  cublasLtMatmulPreference_t pref = nullptr;
  LS_RETURN_IF_ERROR(check(f_->pref_create(&pref), "MatmulPreferenceCreate"));
  const uint64_t workspace_bytes = options_.workspace_bytes;
  cublasStatus_t set = f_->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                    &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  if (set == CUBLAS_STATUS_SUCCESS) {
    heuristic = f_->heuristic(static_cast<cublasLtHandle_t>(handle_), plan->desc, plan->a, plan->b,
                              plan->c, plan->c, pref, 1, &result, &found);
  }
  f_->pref_destroy(pref);
  LS_RETURN_IF_ERROR(check(set, "set MAX_WORKSPACE_BYTES"));
  LS_RETURN_IF_ERROR(check(heuristic, "MatmulAlgoGetHeuristic"));
  if (found == 0) {
    return absl::InternalError(absl::StrCat(
        "cuBLASLt MatmulAlgoGetHeuristic: no algorithm for ", g.rows, "x", g.cols, "x", g.depth,
        " ", GemmOperandsName(g.operands), " epilogue ", EpilogueName(g.epilogue)));
  }
  plan->algo = result.algo;
  return plan;
}

RealBlasApi::PlanCacheStats RealBlasApi::plan_cache_stats() const {
  absl::MutexLock lock(&mu_);
  PlanCacheStats s = stats_;
  s.plans = static_cast<int64_t>(plans_.size());
  return s;
}

absl::Status RealBlasApi::Gemm(const GemmArgs& args, CudaStream stream) {
  LS_RETURN_IF_ERROR(CheckGemm(args));
  if (args.m == 0 || args.n == 0) return absl::OkStatus();
  const ColumnMajorGemm g = ToColumnMajor(args);
  const GemmPlanKey key = GemmPlanKey::Of(g);
  // Held through the enqueue: a plan's descriptor takes this call's bias pointer, and
  // cublasLtMatmul reads it before returning.
  absl::MutexLock lock(&mu_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    ++stats_.misses;
    LS_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, MakePlan(g));
    // Training uses a handful of shapes; a bound keeps a stream of odd ones from growing it.
    if (plans_.size() >= kMaxPlans) {
      plans_.clear();
      ++stats_.evictions;
    }
    it = plans_.emplace(key, std::move(plan)).first;
  } else {
    ++stats_.hits;
  }
  const Plan& plan = *it->second;
  if (g.bias != nullptr) {
    const void* bias = g.bias;
    LS_RETURN_IF_ERROR(
        Check(f_->status_name,
              f_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
              "set BIAS_POINTER"));
  }
  return Check(f_->status_name,
               f_->matmul(static_cast<cublasLtHandle_t>(handle_), plan.desc, &g.alpha, g.a, plan.a,
                          g.b, plan.b, &g.beta, g.c, plan.c, g.c, plan.c, &plan.algo, workspace_,
                          options_.workspace_bytes, reinterpret_cast<cudaStream_t>(stream)),
               "Matmul");
}

}  // namespace lockstep::engine::gpu
