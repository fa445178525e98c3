// bench/gemm_shapes: the backward products of the MLP 784-1024-1024-10 (what a training
// step of bench/train_step and bench/train_throughput runs), through our kernels in
// engine/kernels/cpu/gemm_f32 for dW = X^T dY and dX = dY W^T (called directly, at any batch:
// cpu::Gemm takes them only within kOwnKernel's bounds in blas.cc) and through
// cblas_sgemm (OpenBLAS), one thread, interleaved call by call. Prints, per batch, the
// median time of each family over --reps rounds and the ratio (OpenBLAS time / ours).
// --model=transformer: every product of bench/train_step --model=transformer's step at each
// batch, shape by shape, with its GFLOP/s both ways (the untransposed ones through cpu::Gemm,
// which is OpenBLAS for them: those lines read about 1.0x).
//   bazel run //bench:gemm_shapes
//   bazel run //bench:gemm_shapes -- --batches=128,256 --reps=40
//   bazel run //bench:gemm_shapes -- --model=transformer --batches=2,4,8 --reps=20
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/transformer_spec.h"
#include "engine/kernels/cpu/blas.h"
#include "engine/kernels/cpu/gemm_f32.h"

ABSL_FLAG(std::string, batches, "128,256", "batch sizes (128: a worker's half of 256)");
ABSL_FLAG(int, reps, 40, "rounds per batch (the median is reported)");
ABSL_FLAG(std::string, model, "mlp",
          "mlp: the MLP's backward products by family; transformer: every product of "
          "bench/train_step --model=transformer's step, one line per shape");

namespace {

using lockstep::engine::cpu::Gemm;
using lockstep::engine::cpu::GemmTransA;
using lockstep::engine::cpu::GemmTransB;

constexpr int kWidths[] = {784, 1024, 1024, 10};
constexpr int kLayers = 3;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<float> Filled(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
  return v;
}

double Ms(absl::Time t0) { return absl::ToDoubleMilliseconds(absl::Now() - t0); }

// C[m x n] = op(A) op(B) through our kernels (gemm_f32.h: a product with exactly one operand
// transposed, called directly, whatever cpu::Gemm's bounds would choose, so that both sides
// of those bounds can be measured; the others through cpu::Gemm) or, with `blas`, straight
// through cblas_sgemm.
void Product(bool blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
             const float* b, float* c) {
  if (!blas && trans_a != trans_b) {
    return trans_a ? GemmTransA(m, n, k, 1, a, b, 0, c) : GemmTransB(m, n, k, 1, a, b, 0, c);
  }
  if (!blas) return Gemm<float>(trans_a, trans_b, m, n, k, 1, a, b, 0, c);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1, a, trans_a ? m : k, b,
              trans_b ? k : n, 0, c, n);
}

void RunBatch(int batch, int reps) {
  std::vector<std::vector<float>> x, dy, w, dw, dx;
  for (int l = 0; l < kLayers; ++l) {
    const int in = kWidths[l], out = kWidths[l + 1];
    x.push_back(Filled(static_cast<size_t>(batch) * in, 0.01f));
    dy.push_back(Filled(static_cast<size_t>(batch) * out, 0.02f));
    w.push_back(Filled(static_cast<size_t>(in) * out, 0.03f));
    dw.emplace_back(static_cast<size_t>(in) * out);
    dx.emplace_back(static_cast<size_t>(batch) * in);
  }
  // [family][ours = 0, OpenBLAS = 1]
  std::vector<double> times[2][2];
  for (int rep = 0; rep < reps; ++rep) {
    for (int blas = 0; blas < 2; ++blas) {
      absl::Time t0 = absl::Now();
      for (int l = 0; l < kLayers; ++l) {  // dW = X^T dY: [in x out]
        Product(blas, true, false, kWidths[l], kWidths[l + 1], batch, x[l].data(), dy[l].data(),
                dw[l].data());
      }
      times[0][blas].push_back(Ms(t0));
      t0 = absl::Now();
      for (int l = 1; l < kLayers; ++l) {  // dX = dY W^T: [batch x in] (not for the input)
        Product(blas, false, true, batch, kWidths[l], kWidths[l + 1], dy[l].data(), w[l].data(),
                dx[l].data());
      }
      times[1][blas].push_back(Ms(t0));
    }
  }
  auto row = [batch](const char* name, double ours, double blas) {
    std::printf("batch %4d  %-24s  ours %7.3f ms  OpenBLAS %7.3f ms  %.3fx\n", batch, name, ours,
                blas, blas / ours);
  };
  const char* names[2] = {"dW = X^T dY (3 layers)", "dX = dY W^T (2 layers)"};
  double ours_total = 0, blas_total = 0;
  for (int f = 0; f < 2; ++f) {
    const double ours = Median(times[f][0]), blas = Median(times[f][1]);
    ours_total += ours;
    blas_total += blas;
    row(names[f], ours, blas);
  }
  row("both", ours_total, blas_total);
}

// Every GEMM shape of the Transformer step (bench/transformer_spec.h) at `batch`, as Product
// runs it (ours: our kernels wherever one operand is transposed) and through cblas_sgemm,
// interleaved; per shape the median time of one call, its GFLOP/s and the ratio. The last
// line weighs each shape by its calls per step.
void RunTransformer(int batch, int reps) {
  const std::vector<lockstep::bench::GemmCall> calls =
      lockstep::bench::TransformerStepGemms({}, batch);
  int64_t most = 0;
  for (const auto& c : calls) most = std::max({most, c.m * c.k, c.k * c.n, c.m * c.n});
  const std::vector<float> a = Filled(most, 0.01f), b = Filled(most, 0.02f);
  std::vector<float> c(most);
  double ours_step = 0, blas_step = 0;
  for (const auto& call : calls) {
    std::vector<double> t[2];
    for (int rep = 0; rep < reps; ++rep) {
      for (int blas = 0; blas < 2; ++blas) {
        const absl::Time t0 = absl::Now();
        Product(blas, call.trans_a, call.trans_b, call.m, call.n, call.k, a.data(), b.data(),
                c.data());
        t[blas].push_back(Ms(t0));
      }
    }
    const double ours = Median(t[0]), blas = Median(t[1]);
    const double gflop = 2.0 * call.m * call.n * call.k / 1e9;
    std::printf(
        "%c%c m %5lld n %5lld k %5lld x%-3lld  ours %7.3f ms %5.1f GFLOP/s  OpenBLAS %7.3f ms "
        "%5.1f GFLOP/s  %.3fx\n",
        call.trans_a ? 'T' : 'N', call.trans_b ? 'T' : 'N', static_cast<long long>(call.m),
        static_cast<long long>(call.n), static_cast<long long>(call.k),
        static_cast<long long>(call.times), ours, gflop / ours * 1e3, blas, gflop / blas * 1e3,
        blas / ours);
    ours_step += ours * call.times;
    blas_step += blas * call.times;
  }
  std::printf("step's products: ours %.2f ms, OpenBLAS %.2f ms, %.3fx\n", ours_step, blas_step,
              blas_step / ours_step);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  lockstep::engine::cpu::SetBlasThreads(1);
  const bool transformer = absl::GetFlag(FLAGS_model) == "transformer";
  if (!transformer && absl::GetFlag(FLAGS_model) != "mlp") {
    std::fprintf(stderr, "gemm_shapes: --model: mlp or transformer\n");
    return 2;
  }
  std::printf(
      "gemm_shapes: %s, f32, 1 thread, OpenBLAS %s kernels; median of %d interleaved rounds\n",
      transformer ? "the Transformer step's products" : "MLP 784-1024-1024-10 backward products",
      lockstep::engine::cpu::BlasCoreName().c_str(), absl::GetFlag(FLAGS_reps));
  const auto& row = lockstep::engine::cpu::OwnKernelBoundsHere();
  std::printf(
      "cpu::Gemm's row here (blas.cc): kernels '%s', vendor '%s', ours from %lld "
      "multiply-adds up to %lld batch rows\n",
      row.core, row.vendor, static_cast<long long>(row.min_work),
      static_cast<long long>(row.max_batch));
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch <= 0) {
      std::fprintf(stderr, "gemm_shapes: --batches: bad batch size '%s'\n", std::string(b).c_str());
      return 2;
    }
    if (transformer) {
      RunTransformer(batch, std::max(1, absl::GetFlag(FLAGS_reps)));
    } else {
      RunBatch(batch, std::max(1, absl::GetFlag(FLAGS_reps)));
    }
  }
  return 0;
}
