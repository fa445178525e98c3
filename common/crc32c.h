// CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), as used by
// checkpoints' headers and by TFRecord framing in TensorBoard event files.
//
// Crc32c() uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time)
// and a slicing-by-8 table otherwise; both give identical results. Pure functions, no state
// beyond constant tables: safe from any thread.
#ifndef LOCKSTEP_COMMON_CRC32C_H_
#define LOCKSTEP_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace lockstep {

// Extends `crc` (the CRC of earlier bytes; 0 for none) over data[0, n). Extending in pieces
// equals one call over the concatenation: Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }
inline uint32_t Crc32c(absl::string_view s) { return Crc32c(s.data(), s.size()); }

// The same CRCs computed without the hardware instruction (tests compare the two paths).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

// TFRecord's masked CRC: a CRC stored next to the data it covers is masked so that a CRC of
// bytes that themselves contain CRCs stays well distributed.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CRC32C_H_
