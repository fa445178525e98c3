// TransformerSpec: the causal Transformer classifier the training benchmarks time
// (bench/train_step --model=transformer, bench/train_throughput --model=transformer):
// optionally a token embedding, then `blocks` pre-norm blocks of layer_norm, causal
// self_attention, residual add, layer_norm, dense 4d, gelu, dense d, residual add; then
// global average pooling and a dense classifier. Stateless; thread-safe.
#ifndef LOCKSTEP_BENCH_TRANSFORMER_SPEC_H_
#define LOCKSTEP_BENCH_TRANSFORMER_SPEC_H_

#include <cstdint>
#include <vector>

#include "lockstep/v1/model.pb.h"

namespace lockstep::bench {

struct TransformerShape {
  int64_t seq = 128;
  int64_t width = 256;
  int heads = 4;
  int blocks = 2;
  int64_t vocab = 1000;  // > 0: inputs are [seq] token ids; 0: [seq, width] floats
  int64_t classes = 10;
};

v1::ModelSpec TransformerSpec(const TransformerShape& s);

// One cpu::Gemm call shape (row-major, as the kernels make it), `times` times per step.
struct GemmCall {
  bool trans_a, trans_b;
  int64_t m, n, k;
  int64_t times = 1;
};
// The GEMMs one training step of the Transformer calls, with the shapes and transposes its
// kernels use (engine/ops/self_attention.cc, matmul.cc): per block the QKV, output and two
// feed-forward products forward, their weight and input gradients backward, and per example
// and head the attention's two products forward and four backward (in full: the causal mask
// skips none); then the classifier.
std::vector<GemmCall> TransformerStepGemms(const TransformerShape& s, int batch);

// The FLOPs of `calls`: 2 m n k per product, `times` times each.
double GemmFlops(const std::vector<GemmCall>& calls);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_TRANSFORMER_SPEC_H_
