#include "distribute/auto_shard.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace lockstep::distribute {

const char* AutoShardPolicyName(AutoShardPolicy policy) {
  switch (policy) {
    case AutoShardPolicy::kAuto:
      return "AUTO";
    case AutoShardPolicy::kFile:
      return "FILE";
    case AutoShardPolicy::kData:
      return "DATA";
    case AutoShardPolicy::kOff:
      return "OFF";
  }
  return "?";
}

absl::StatusOr<AutoShardPolicy> ParseAutoShardPolicy(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  for (AutoShardPolicy p : {AutoShardPolicy::kAuto, AutoShardPolicy::kFile, AutoShardPolicy::kData,
                            AutoShardPolicy::kOff}) {
    if (upper == AutoShardPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown auto-shard policy \"", name, "\": expected AUTO, FILE, DATA or OFF"));
}

absl::StatusOr<ShardPlan> ResolveAutoShard(AutoShardPolicy policy,
                                           const std::vector<std::string>& files, int num_workers,
                                           int worker_index, int num_files) {
  if (num_workers < 1 || worker_index < 0 || worker_index >= num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-shard: worker ", worker_index, " of ", num_workers));
  }
  const size_t n = num_files >= 0 ? static_cast<size_t>(num_files) : files.size();
  ShardPlan plan;
  plan.spec.files = files;
  if (num_workers == 1 || policy == AutoShardPolicy::kOff) {
    plan.policy = AutoShardPolicy::kOff;
    if (num_workers == 1 && policy != AutoShardPolicy::kOff) {
      plan.reason = "one worker: nothing to shard";
    }
    return plan;
  }
  if (policy == AutoShardPolicy::kAuto) {
    if (n == 0) {
      policy = AutoShardPolicy::kData;
      plan.reason = absl::StrCat(
          "AUTO sharding falls back to DATA: the dataset is not read from files, so each of the ",
          num_workers, " workers reads all of it and keeps 1 element in ", num_workers,
          " (consider DistributeDatasetsFromFunction)");
    } else if (static_cast<int>(n) < num_workers) {
      policy = AutoShardPolicy::kData;
      plan.reason =
          absl::StrCat("AUTO sharding falls back to DATA: ", n, " input file(s) for ", num_workers,
                       " workers (FILE sharding needs at least one file per worker), so "
                       "each worker reads every file and keeps 1 element in ",
                       num_workers);
    } else {
      policy = AutoShardPolicy::kFile;
      plan.reason =
          absl::StrCat("AUTO sharding by FILE: ", n, " files for ", num_workers, " workers");
    }
  }
  if (policy == AutoShardPolicy::kFile) {
    if (static_cast<int>(n) < num_workers) {
      return absl::FailedPreconditionError(
          absl::StrCat("FILE auto-sharding needs at least one input file per worker: ", n,
                       " file(s) for ", num_workers,
                       " workers; use DATA or OFF, or split the input into more "
                       "files"));
    }
    plan.spec.files.clear();
    for (size_t j = worker_index; j < files.size(); j += num_workers) {
      plan.spec.files.push_back(files[j]);
    }
    plan.spec.num_file_shards = num_workers;
    plan.spec.file_shard_index = worker_index;
  } else {
    plan.spec.num_shards = num_workers;
    plan.spec.shard_index = worker_index;
  }
  plan.policy = policy;
  return plan;
}

}  // namespace lockstep::distribute
