// Auto-sharding of an input pipeline across workers (tf.data.experimental.AutoShardPolicy),
// resolved once per worker before its pipeline is built:
//
//   OFF   every worker reads everything (and so sees the same data).
//   FILE  worker i reads the files j with j % num_workers == i; needs at least one file per
//         worker (FAILED_PRECONDITION otherwise, saying to use DATA or OFF).
//   DATA  every worker reads every file and keeps the elements j with
//         j % num_workers == i (each worker runs the whole pipeline: redundant reading).
//   AUTO  FILE when the dataset is read from files and there is at least one per worker;
//         otherwise DATA, with a warning logged that says why.
// With one worker there is nothing to shard: the result is OFF whatever the policy.
//
// Stateless functions; thread-safe.
#ifndef LOCKSTEP_DISTRIBUTE_AUTO_SHARD_H_
#define LOCKSTEP_DISTRIBUTE_AUTO_SHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::distribute {

enum class AutoShardPolicy { kAuto, kFile, kData, kOff };
const char* AutoShardPolicyName(AutoShardPolicy policy);
// "AUTO", "FILE", "DATA", "OFF" (any case); INVALID_ARGUMENT otherwise.
absl::StatusOr<AutoShardPolicy> ParseAutoShardPolicy(absl::string_view name);

// What one worker's input pipeline reads: its source files (FILE sharding: files
// file_shard_index, + num_file_shards, ...; `files` lists them when the source named its
// files), then keeps element j when j % num_shards == shard_index (DATA sharding). 1/0 for
// no sharding.
struct ShardSpec {
  std::vector<std::string> files;
  int num_file_shards = 1;
  int file_shard_index = 0;
  int num_shards = 1;
  int shard_index = 0;
};

struct ShardPlan {
  AutoShardPolicy policy = AutoShardPolicy::kOff;  // resolved: FILE, DATA or OFF
  ShardSpec spec;
  std::string reason;  // why AUTO chose what it chose ("" when the policy was explicit)
};

// `files` are the dataset's input files in order (empty when it is not read from files);
// `num_files` overrides their count for sources that only know how many they read (-1:
// files.size()).
absl::StatusOr<ShardPlan> ResolveAutoShard(AutoShardPolicy policy,
                                           const std::vector<std::string>& files, int num_workers,
                                           int worker_index, int num_files = -1);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_AUTO_SHARD_H_
