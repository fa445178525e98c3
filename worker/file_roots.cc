#include "worker/file_roots.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace lockstep {
namespace worker {
namespace {

bool HasDotDot(const std::string& path) {
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return true;
  }
  return false;
}

// realpath(3), or nullopt (errno set) when `path` does not exist or cannot be resolved.
std::optional<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return std::nullopt;
  return std::string(resolved);
}

// Whether `path` (real) is `root` (real) or lies under it.
bool Inside(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

// The real path absolute `path` will have once its missing parts are created: the nearest
// existing ancestor resolved, the rest appended (it holds no "..": checked before). A part
// that is a file (ENOTDIR) counts as missing: creating the directory fails later, naming it.
std::optional<std::string> RealPathToBe(const std::string& path) {
  std::string existing = path;
  std::vector<std::string> missing;  // innermost first
  while (true) {
    if (std::optional<std::string> real = RealPath(existing); real.has_value()) {
      std::string out = *real;
      for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (it->empty() || *it == ".") continue;
        absl::StrAppend(&out, out == "/" ? "" : "/", *it);
      }
      return out;
    }
    if (errno != ENOENT && errno != ENOTDIR) return std::nullopt;
    const size_t slash = existing.rfind('/');
    if (slash == std::string::npos) return std::nullopt;
    missing.push_back(existing.substr(slash + 1));
    existing = slash == 0 ? "/" : existing.substr(0, slash);
  }
}

absl::Status CheckRoots(const std::vector<std::string>& roots, const char* flag) {
  if (roots.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": at least one directory is needed"));
  }
  for (const std::string& root : roots) {
    if (!absl::StartsWith(root, "/") || HasDotDot(root)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": '", root, "' must be an absolute directory with no '..' component"));
    }
  }
  return absl::OkStatus();
}

absl::Status Outside(const std::string& field, const std::string& path, const std::string& real,
                     const std::vector<std::string>& roots, const char* kind, const char* flag) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", path, "'", real.empty() || real == path ? "" : absl::StrCat(" (", real, ")"),
      " is outside this worker's ", kind, " roots (", absl::StrJoin(roots, ", "),
      "); put it under one of them, or start lockstepd with ", flag,
      "=DIR[,DIR...] naming a directory that holds it"));
}

// Where a relative `path` is looked for: under each root, in order.
std::vector<std::string> Candidates(const std::string& path,
                                    const std::vector<std::string>& roots) {
  if (absl::StartsWith(path, "/")) return {path};
  std::vector<std::string> out;
  for (const std::string& root : roots) out.push_back(absl::StrCat(root, "/", path));
  return out;
}

}  // namespace

std::vector<std::string> SplitRoots(const std::string& list) {
  return absl::StrSplit(list, ',', absl::SkipEmpty());
}

absl::StatusOr<FileRoots> FileRoots::Create(std::vector<std::string> data,
                                            std::vector<std::string> output) {
  LS_RETURN_IF_ERROR(CheckRoots(data, "--data_root"));
  LS_RETURN_IF_ERROR(CheckRoots(output, "--output_root"));
  return FileRoots(std::move(data), std::move(output));
}

absl::StatusOr<std::string> FileRoots::ResolveData(const std::string& path,
                                                   const std::string& field) const {
  if (path.empty() || HasDotDot(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", path, "' must be a file path with no '..' component"));
  }
  std::string first_real;
  for (const std::string& candidate : Candidates(path, data_)) {
    std::optional<std::string> real = RealPath(candidate);
    if (!real.has_value()) continue;
    if (first_real.empty()) first_real = *real;
    for (const std::string& root : data_) {
      std::optional<std::string> real_root = RealPath(root);
      if (real_root.has_value() && Inside(*real, *real_root)) return *real;
    }
  }
  if (first_real.empty()) {
    // Missing files are reported as the reader reports them (naming the field), but only
    // inside the roots: a path outside is refused without saying whether it exists.
    const std::string at = Candidates(path, data_)[0];
    std::optional<std::string> parent = RealPathToBe(at);
    for (const std::string& root : data_) {
      std::optional<std::string> real_root = RealPath(root);
      if (parent.has_value() && real_root.has_value() && Inside(*parent, *real_root)) return at;
    }
  }
  return Outside(field, path, first_real, data_, "data", "--data_root");
}

absl::StatusOr<std::string> FileRoots::ResolveOutput(const std::string& path,
                                                     const std::string& field) const {
  if (path.empty() || HasDotDot(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", path, "' must be a directory with no '..' component"));
  }
  const std::string at = Candidates(path, output_)[0];
  std::optional<std::string> real = RealPathToBe(at);
  if (real.has_value()) {
    for (const std::string& root : output_) {
      std::optional<std::string> real_root = RealPathToBe(root);
      if (real_root.has_value() && Inside(*real, *real_root)) return *real;
    }
  }
  return Outside(field, path, real.value_or(""), output_, "output", "--output_root");
}

absl::Status FileRoots::ResolveSpec(v1::JobSpec* spec) const {
  v1::DataSpec* data = spec->mutable_data();
  std::vector<std::pair<v1::DataSource*, const char*>> sources;
  if (data->has_train()) sources.emplace_back(data->mutable_train(), "data.train");
  if (data->has_eval()) sources.emplace_back(data->mutable_eval(), "data.eval");
  for (auto [source, name] : sources) {
    for (int i = 0; i < source->files_size(); ++i) {
      LS_ASSIGN_OR_RETURN(*source->mutable_files(i),
                          ResolveData(source->files(i), absl::StrCat(name, ".files[", i, "]")));
    }
  }
  if (spec->has_init_from()) {
    LS_ASSIGN_OR_RETURN(*spec->mutable_init_from()->mutable_path(),
                        ResolveData(spec->init_from().path(), "init_from.path"));
  }
  if (!spec->checkpoint().dir().empty()) {
    LS_ASSIGN_OR_RETURN(*spec->mutable_checkpoint()->mutable_dir(),
                        ResolveOutput(spec->checkpoint().dir(), "checkpoint.dir"));
  }
  if (!spec->summaries().dir().empty()) {
    LS_ASSIGN_OR_RETURN(*spec->mutable_summaries()->mutable_dir(),
                        ResolveOutput(spec->summaries().dir(), "summaries.dir"));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace lockstep
