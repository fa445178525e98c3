#include "engine/ops/builtin_ops.h"

namespace lockstep::engine {

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
