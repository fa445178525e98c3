// Incarnation ids: a random non-zero 64-bit number drawn once per process start, so that a
// restarted process is told apart from the one it replaces (as in TensorFlow's
// coordination service). Thread model: thread-safe free functions.
#ifndef LOCKSTEP_COMMON_INCARNATION_H_
#define LOCKSTEP_COMMON_INCARNATION_H_

#include <cstdint>
#include <string>

namespace lockstep {

// A fresh random incarnation, never 0 (0 means "none" on the wire).
uint64_t NewIncarnation();

// The first 8 hex digits, for tables and log lines ("3f2a9c01").
std::string ShortIncarnation(uint64_t incarnation);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_INCARNATION_H_
