// BuiltinOps(): the registry of every op the engine implements. Each op (or family of ops
// sharing one kernel) defines its shape function and its per-device kernels in its own
// file, engine/ops/<op>.cc, and registers them through the Register* function declared
// here. A registry is a plain value: callers own it (Graph shares one per graph).
#ifndef LOCKSTEP_ENGINE_OPS_BUILTIN_OPS_H_
#define LOCKSTEP_ENGINE_OPS_BUILTIN_OPS_H_

#include "engine/must_register.h"
#include "engine/op_registry.h"

namespace lockstep::engine {

OpRegistry BuiltinOps();

// One per file under engine/ops/. A registration that fails (an op registered twice) is a
// programming error: each file registers through MustRegister (must_register.h), which aborts
// with the reason.
void RegisterSourceOps(OpRegistry* r);    // INPUT, VARIABLE (source.cc)
void RegisterMatMul(OpRegistry* r);       // matmul.cc
void RegisterElementwise(OpRegistry* r);  // ADD, SUB, MUL (elementwise.cc)
void RegisterBiasAdd(OpRegistry* r);      // bias_add.cc
void RegisterActivations(OpRegistry* r);  // RELU, SIGMOID, TANH, GELU (activations.cc)
void RegisterSoftmax(OpRegistry* r);      // softmax.cc
void RegisterLosses(OpRegistry* r);       // SPARSE_SOFTMAX_CROSS_ENTROPY, ACCURACY, MSE (losses.cc)
void RegisterReductions(OpRegistry* r);   // SUM, MEAN (reduce.cc)
void RegisterReshapes(OpRegistry* r);     // RESHAPE, FLATTEN (reshape.cc)
void RegisterWindowOps(OpRegistry* r);    // CONV2D, MAX_POOL2D (conv_pool.cc)
void RegisterDropout(OpRegistry* r);      // dropout.cc
void RegisterArgMax(OpRegistry* r);       // argmax.cc
void RegisterConcat(OpRegistry* r);       // concat.cc
void RegisterLayerNorm(OpRegistry* r);    // layer_norm.cc
void RegisterBatchNorm(OpRegistry* r);    // batch_norm.cc
void RegisterEmbedding(OpRegistry* r);    // embedding.cc
void RegisterSelfAttention(OpRegistry* r);  // self_attention.cc

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPS_BUILTIN_OPS_H_
