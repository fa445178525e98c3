// Test helpers: build a group of communicators whose ranks are threads of this process, and
// run a function on every rank at once. Test-only.
#ifndef LOCKSTEP_COLLECTIVES_TEST_UTIL_H_
#define LOCKSTEP_COLLECTIVES_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "collectives/communicator_factory.h"

namespace lockstep {
namespace collectives {

// Runs fn(rank) on `n` threads and joins them.
void RunRanks(int n, const std::function<void(int rank)>& fn);

// Creates `n` communicators over `kind` (connected concurrently through one InMemoryStore).
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeGroup(
    TransportKind kind, int n, const AlgorithmOptions& options = {},
    const std::string& secret = "test-secret");

// A key prefix unique in this process and run (for shm segment names).
std::string UniquePrefix();

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TEST_UTIL_H_
