#include "engine/philox.h"

#include <cmath>

namespace lockstep::engine {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// 53 random bits -> [0, 1).
inline double ToUnit(uint32_t a, uint32_t b) {
  uint64_t bits = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace

Philox::Block Philox::Generate(uint64_t counter_lo, uint64_t counter_hi) const {
  Block c = {static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
             static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key_), k1 = static_cast<uint32_t>(key_ >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kM0, c[0], &hi0, &lo0);
    MulHiLo(kM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

double Philox::Uniform(uint64_t i, uint64_t hi) const {
  Block b = Generate(i, hi);
  return ToUnit(b[0], b[1]);
}

double Philox::Normal(uint64_t i, uint64_t hi) const {
  Block b = Generate(i, hi);
  double u1 = ToUnit(b[0], b[1]);
  double u2 = ToUnit(b[2], b[3]);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t HashName(absl::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t MixKey(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace lockstep::engine
