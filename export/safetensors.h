// safetensors, as the format's own documentation describes it, written and read:
//   bytes [0, 8)       N, the header's length, an unsigned 64-bit little-endian integer
//   bytes [8, 8 + N)   a JSON object: for each tensor name {"dtype": "F32", "shape": [64, 128],
//                      "data_offsets": [begin, end]} (offsets into the data buffer), and
//                      "__metadata__": {string: string}; padded with spaces so that 8 + N is
//                      a multiple of 8
//   bytes [8 + N, ...) the data buffer: each tensor's elements, little-endian, row-major,
//                      contiguous, in the order written, with no gaps
// Lockstep's DType names are safetensors' own (F32, F64, F16, BF16, I32, I64).
//
// The reader is strict: every tensor must lie inside the buffer, match its shape and dtype,
// and the tensors must cover the buffer exactly (no overlap, no gap), as the format requires.
//
// Thread model: plain functions; no shared state.
#ifndef LOCKSTEP_EXPORT_SAFETENSORS_H_
#define LOCKSTEP_EXPORT_SAFETENSORS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "export/format_registry.h"
#include "export/weights.h"

namespace lockstep::exporting {

// The file's bytes for `weights` (tensors in their order, metadata as __metadata__).
// INVALID_ARGUMENT naming a tensor CheckTensor refuses.
absl::StatusOr<std::string> EncodeSafetensors(const Weights& weights);

// The tensors (in data-offset order) and metadata of a safetensors file's bytes.
// INVALID_ARGUMENT saying what is wrong and where (the header length, the JSON, a tensor's
// entry by name, an unknown dtype, offsets outside the buffer or overlapping).
absl::StatusOr<Weights> DecodeSafetensors(absl::string_view bytes);

// DecodeSafetensors of the file at `path`; errors are prefixed with the path.
absl::StatusOr<Weights> ReadSafetensorsFile(const std::string& path);

// Adds "safetensors" to `registry`: the checkpoint's WeightsFromCheckpoint, as EncodeSafetensors.
absl::Status RegisterSafetensors(FormatRegistry& registry);

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_SAFETENSORS_H_
