// Cryptographic randomness for everything an attacker must not guess or predict: job
// secrets, bearer tokens, handshake nonces, incarnation ids, names of shared-memory
// segments. It comes from the kernel's CSPRNG (getrandom(2), which blocks only until the
// pool is seeded at boot), never from a general-purpose generator such as absl::BitGen,
// whose output is not meant to resist prediction. Jitter and test data may keep BitGen.
//
// A process with no randomness can make nothing safe, so these abort (with a message) rather
// than return a weak value; getrandom fails only on a kernel without it (before 3.17).
// Thread model: thread-safe free functions.
#ifndef LOCKSTEP_COMMON_SECURE_RANDOM_H_
#define LOCKSTEP_COMMON_SECURE_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep {

// Fills `out` with `n` random bytes.
void SecureRandomBytes(void* out, size_t n);

// `bytes` random bytes, hex-encoded (2 * bytes characters): secrets and tokens.
std::string SecureRandomHex(size_t bytes);

// A random 64-bit number.
uint64_t SecureRandomUint64();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SECURE_RANDOM_H_
