#include "engine/ops/builtin_ops.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::engine {

void MustRegister(OpRegistry* r, OpDef def) {
  absl::Status s = r->Register(std::move(def));
  if (!s.ok()) {
    std::fprintf(stderr, "engine op registry: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

OpRegistry BuiltinOps() {
  OpRegistry r;
  RegisterSourceOps(&r);
  RegisterMatMul(&r);
  RegisterElementwise(&r);
  RegisterBiasAdd(&r);
  RegisterActivations(&r);
  RegisterSoftmax(&r);
  RegisterLosses(&r);
  RegisterReductions(&r);
  RegisterReshapes(&r);
  RegisterWindowOps(&r);
  RegisterDropout(&r);
  RegisterArgMax(&r);
  RegisterConcat(&r);
  RegisterLayerNorm(&r);
  RegisterBatchNorm(&r);
  RegisterEmbedding(&r);
  RegisterSelfAttention(&r);
  return r;
}

}  // namespace lockstep::engine
