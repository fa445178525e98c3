#include "export/builtin_formats.h"

#include "export/npz.h"
#include "export/onnx.h"
#include "export/safetensors.h"

namespace lockstep::exporting {

absl::StatusOr<FormatRegistry> BuiltinFormats() {
  FormatRegistry r;
  for (auto add : {RegisterSafetensors, RegisterNpz, RegisterOnnx}) {
    if (absl::Status s = add(r); !s.ok()) return s;
  }
  return r;
}

}  // namespace lockstep::exporting
