// NumPy's .npz: a zip archive of one .npy file per tensor ("dense/kernel.npy"; np.load(path)
// gives them back by name without ".npy"). Members are stored uncompressed, so the archive
// is written in one pass with no compressor; a CRC-32 per member, as zip requires.
//
// Each .npy is format version 1.0: the magic "\x93NUMPY", bytes 1 and 0, a 2-byte
// little-endian header length, then a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (64, 128), }
// padded with spaces and ended by '\n' so the data starts at a multiple of 64 bytes, then the
// elements, little-endian, row-major (C order).
//
// NumPy has no bfloat16: a BF16 tensor is refused naming it. Archives and members stay
// under 4 GiB (no zip64); larger ones are refused.
//
// Thread model: plain functions; no shared state.
#ifndef LOCKSTEP_EXPORT_NPZ_H_
#define LOCKSTEP_EXPORT_NPZ_H_

#include <string>

#include "absl/status/statusor.h"
#include "export/format_registry.h"
#include "export/weights.h"

namespace lockstep::exporting {

// One .npy file (version 1.0) holding `tensor`. INVALID_ARGUMENT naming the tensor for a
// dtype NumPy lacks (BF16) or one CheckTensor refuses.
absl::StatusOr<std::string> EncodeNpy(const v1::NamedTensor& tensor);

// The .npz archive of every tensor of `weights`, in order; the metadata is not written (npz
// has no place for it). INVALID_ARGUMENT naming a tensor EncodeNpy refuses, or when the
// archive would pass 4 GiB.
absl::StatusOr<std::string> EncodeNpz(const Weights& weights);

// Adds "npz" to `registry`: the checkpoint's WeightsFromCheckpoint, as EncodeNpz.
absl::Status RegisterNpz(FormatRegistry& registry);

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_NPZ_H_
