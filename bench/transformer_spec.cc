#include "bench/transformer_spec.h"

#include <string>

namespace lockstep::bench {

v1::ModelSpec TransformerSpec(const TransformerShape& s) {
  v1::ModelSpec spec;
  spec.add_input_shape(s.seq);
  if (s.vocab <= 0) spec.add_input_shape(s.width);
  spec.set_seed(1);
  spec.set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  auto add = [&](const std::string& name) {
    v1::Layer* l = spec.add_layers();
    l->set_name(name);
    return l;
  };
  std::string x = "features";
  if (s.vocab > 0) {
    auto* emb = add("tok")->mutable_embedding();
    emb->set_input_dim(s.vocab);
    emb->set_output_dim(s.width);
    x = "tok";
  }
  for (int b = 0; b < s.blocks; ++b) {
    const std::string p = "b" + std::to_string(b) + "/";
    v1::Layer* ln1 = add(p + "ln1");
    ln1->mutable_layer_norm();
    ln1->add_inputs(x);
    auto* att = add(p + "att")->mutable_self_attention();
    att->set_num_heads(s.heads);
    att->set_causal(true);
    v1::Layer* res = add(p + "res1");
    res->mutable_add();
    res->add_inputs(x);
    res->add_inputs(p + "att");
    add(p + "ln2")->mutable_layer_norm();
    add(p + "ff1")->mutable_dense()->set_units(4 * s.width);
    add(p + "gelu")->mutable_gelu();
    add(p + "ff2")->mutable_dense()->set_units(s.width);
    v1::Layer* res2 = add(p + "res2");
    res2->mutable_add();
    res2->add_inputs(p + "res1");
    res2->add_inputs(p + "ff2");
    x = p + "res2";
  }
  add("pool")->mutable_global_average_pooling();
  add("logits")->mutable_dense()->set_units(s.classes);
  return spec;
}

std::vector<GemmCall> TransformerStepGemms(const TransformerShape& s, int batch) {
  const int64_t rows = int64_t{batch} * s.seq, d = s.width, t = s.seq, k = d / s.heads;
  const int64_t pairs = int64_t{batch} * s.heads;
  std::vector<GemmCall> calls;
  // A dense product [m, in] x [in, out]: forward, weight gradient, input gradient.
  auto dense = [&](int64_t m, int64_t in, int64_t out) {
    calls.push_back({false, false, m, out, in});
    calls.push_back({true, false, in, out, m});
    calls.push_back({false, true, m, in, out});
  };
  for (int b = 0; b < s.blocks; ++b) {
    dense(rows, d, 3 * d);                            // QKV
    calls.push_back({false, true, t, t, k, pairs});   // scores = Q K^T
    calls.push_back({false, false, t, k, t, pairs});  // P V
    calls.push_back({true, false, t, k, t, pairs});   // dV = P^T dO
    calls.push_back({false, true, t, t, k, pairs});   // dP = dO V^T
    calls.push_back({false, false, t, k, t, pairs});  // dQ = dS K
    calls.push_back({true, false, t, k, t, pairs});   // dK = dS^T Q
    dense(rows, d, d);                                // attention output
    dense(rows, d, 4 * d);                            // feed-forward
    dense(rows, 4 * d, d);
  }
  dense(batch, d, s.classes);
  return calls;
}

double GemmFlops(const std::vector<GemmCall>& calls) {
  double flops = 0;
  for (const GemmCall& c : calls) flops += 2.0 * c.m * c.n * c.k * c.times;
  return flops;
}

}  // namespace lockstep::bench
