// Message-size sweeps for the peer all-reduce benchmarks, nccl-tests style.
//
// "MIN:MAX" (or a single "SIZE") with optional binary suffixes K, M, G (64M = 64 MiB)
// expands to MIN, 2*MIN, 4*MIN, ... up to and including MAX (like nccl-tests -b -e -f 2).
// Sizes are in bytes of float32 payload, so each must be a positive multiple of 4.
#ifndef LOCKSTEP_BENCH_PEERS_SIZE_RANGE_H_
#define LOCKSTEP_BENCH_PEERS_SIZE_RANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::bench {

// Parses "8", "4K", "64M", "1G" (binary units, case-insensitive suffix).
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Parses "MIN:MAX" or "SIZE" and returns the doubling sweep from MIN to MAX. Fails with
// INVALID_ARGUMENT when a bound is malformed, zero, not a multiple of 4, or MIN > MAX.
absl::StatusOr<std::vector<uint64_t>> ParseSizeRange(absl::string_view text);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_PEERS_SIZE_RANGE_H_
