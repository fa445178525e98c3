#include "worker/checkpoint_copies.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {

absl::StatusOr<std::vector<std::string>> PruneCheckpointCopies(const std::string& state_dir,
                                                               const std::string& current,
                                                               int retained_jobs) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(state_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::vector<std::string>();
  auto failed = [](const char* what, const fs::path& path, const std::error_code& ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat(what, " '", path.string(), "': ", ec.message()));
  };
  std::vector<std::pair<fs::file_time_type, fs::path>> others;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == current || !it->is_directory(ec)) continue;
    const fs::file_time_type written = fs::last_write_time(it->path(), ec);
    if (ec) return failed("read the time of", it->path(), ec);
    others.emplace_back(written, it->path());
  }
  if (ec) return failed("list", root, ec);
  std::sort(others.begin(), others.end());  // oldest first
  std::vector<std::string> deleted;
  const size_t keep = static_cast<size_t>(std::max(0, retained_jobs));
  for (size_t i = 0; i + keep < others.size(); ++i) {
    fs::remove_all(others[i].second, ec);
    if (ec) return failed("delete", others[i].second, ec);
    deleted.push_back(others[i].second.string());
  }
  return deleted;
}

}  // namespace worker
}  // namespace lockstep
