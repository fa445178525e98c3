#include "collectives/test_util.h"

#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"

namespace lockstep {
namespace collectives {

void RunRanks(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

std::string UniquePrefix() {
  absl::BitGen gen;
  return absl::StrCat("t", getpid(), "x", absl::Uniform<uint32_t>(gen));
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeGroup(
    TransportKind kind, int n, const AlgorithmOptions& options, const std::string& secret) {
  InMemoryStore store;
  auto hub = std::make_shared<InProcHub>(n);
  const std::string prefix = UniquePrefix();
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> made(n);
  RunRanks(n, [&](int r) {
    CommunicatorConfig config;
    config.rank = r;
    config.world_size = n;
    config.transport = kind;
    config.secret = secret;
    config.key_prefix = prefix;
    config.connect_timeout = absl::Seconds(20);
    config.algorithms = options;
    config.inproc_hub = hub;
    made[r] = CreateCommunicator(config, &store);
  });
  std::vector<std::unique_ptr<Communicator>> group;
  for (auto& m : made) {
    if (!m.ok()) return m.status();
    group.push_back(std::move(m).value());
  }
  return group;
}

}  // namespace collectives
}  // namespace lockstep
