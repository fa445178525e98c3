// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11): a pure function of
// (key, counter), so element i of a random tensor depends only on the seed, a stream id
// (variable name, dropout node) and i; never on thread count, replica count or call order.
// Stateless and thread-safe.
#ifndef LOCKSTEP_ENGINE_PHILOX_H_
#define LOCKSTEP_ENGINE_PHILOX_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace lockstep::engine {

class Philox {
 public:
  using Block = std::array<uint32_t, 4>;

  // `key` names the stream (e.g. MixKey(seed, HashName(variable_name))).
  explicit Philox(uint64_t key) : key_(key) {}

  // Four 32-bit words for 128-bit counter (lo, hi).
  Block Generate(uint64_t counter_lo, uint64_t counter_hi = 0) const;
  // A uniform double in [0, 1) and a standard normal, both from counter (i, hi).
  double Uniform(uint64_t i, uint64_t hi = 0) const;
  double Normal(uint64_t i, uint64_t hi = 0) const;

 private:
  uint64_t key_;
};

// A stable 64-bit hash of a name (FNV-1a): the same on every machine and build.
uint64_t HashName(absl::string_view name);
// Mixes several 64-bit values into one key (splitmix64 steps).
uint64_t MixKey(uint64_t a, uint64_t b);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_PHILOX_H_
