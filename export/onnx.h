// ONNX export: the job's model as an inference graph (opset 17, IR version 8) that takes the
// features as the data files hold them. Layout:
//   input  "features"  float [batch, input_shape...]   (batch symbolic: any batch size)
//   Div by 1/featureScale (the input pipeline's Normalize, exactly), when the spec scales
//   the layers, each kind as onnx_layers.cc maps it, weights as initializers under their
//          checkpoint names ("hidden/kernel")
//   output "output"    float [batch, ...]: the model's last layer (logits for a classifier)
// metadata_props: the export's metadata (job_id, step, spec, ...), as safetensors'.
// Refused, naming what: no --spec, several named inputs, layers with explicit inputs
// (non-sequential graphs), f64 models, and every layer kind with no mapping.
//
// Thread model: plain functions; no shared state.
#ifndef LOCKSTEP_EXPORT_ONNX_H_
#define LOCKSTEP_EXPORT_ONNX_H_

#include <string>

#include "absl/status/statusor.h"
#include "export/format_registry.h"

namespace lockstep::exporting {

constexpr int kOnnxOpset = 17;

// The serialized onnx.ModelProto for `request` (its spec must be set).
absl::StatusOr<std::string> EncodeOnnx(const ExportRequest& request);

// Adds "onnx" to `registry`.
absl::Status RegisterOnnx(FormatRegistry& registry);

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_ONNX_H_
