#include "worker/gpu/gpu_selection.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::worker {
namespace {

std::string VisibleNote(bool cuda_visible_set, absl::string_view cuda_visible_devices) {
  if (!cuda_visible_set) return "CUDA_VISIBLE_DEVICES is not set";
  return absl::StrCat("CUDA_VISIBLE_DEVICES=\"", cuda_visible_devices, "\"");
}

}  // namespace

absl::StatusOr<GpuRequest> ParseGpuFlag(absl::string_view flag) {
  GpuRequest request;
  const absl::string_view v = absl::StripAsciiWhitespace(flag);
  request.explicit_flag = !v.empty();
  if (v.empty() || v == "all") return request;
  if (v == "none") {
    request.mode = GpuRequest::Mode::kNone;
    return request;
  }
  request.mode = GpuRequest::Mode::kList;
  std::set<int> seen;
  for (absl::string_view word : absl::StrSplit(v, ',')) {
    word = absl::StripAsciiWhitespace(word);
    int n = 0;
    if (!absl::SimpleAtoi(word, &n) || n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus=", v, ": \"", word,
                       "\" is not a GPU number (expected all, none, or CUDA device numbers such "
                       "as 0,1)"));
    }
    if (!seen.insert(n).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus=", v, ": GPU ", n, " is listed twice; one replica per GPU"));
    }
    request.ordinals.push_back(n);
  }
  return request;
}

absl::StatusOr<std::vector<GpuInfo>> SelectGpus(const GpuRequest& request,
                                                const std::vector<GpuInfo>& visible,
                                                bool cuda_visible_set,
                                                absl::string_view cuda_visible_devices) {
  switch (request.mode) {
    case GpuRequest::Mode::kNone:
      return std::vector<GpuInfo>();
    case GpuRequest::Mode::kAll:
      if (visible.empty() && request.explicit_flag) {
        return absl::NotFoundError(
            absl::StrCat("--gpus=all: this host shows no GPU (",
                         VisibleNote(cuda_visible_set, cuda_visible_devices),
                         "); check nvidia-smi, or run without --gpus for a CPU-only worker"));
      }
      return visible;
    case GpuRequest::Mode::kList:
      break;
  }
  std::vector<GpuInfo> out;
  for (int n : request.ordinals) {
    const GpuInfo* found = nullptr;
    for (const GpuInfo& g : visible) {
      if (g.ordinal == n) found = &g;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "--gpus: GPU ", n, " does not exist: this host shows ", DescribeGpus(visible), " (",
          VisibleNote(cuda_visible_set, cuda_visible_devices),
          "; --gpus numbers count among the visible GPUs)"));
    }
    out.push_back(*found);
  }
  return out;
}

absl::StatusOr<std::vector<GpuInfo>> OfferedGpus(absl::string_view flag,
                                                 const absl::StatusOr<std::vector<GpuInfo>>& probed,
                                                 const char* cuda_visible_devices,
                                                 std::string* warning) {
  absl::StatusOr<GpuRequest> request = ParseGpuFlag(flag);
  if (!request.ok()) return request.status();
  if (request->mode == GpuRequest::Mode::kNone) return std::vector<GpuInfo>();
  if (!probed.ok()) {
    if (request->explicit_flag) {
      return absl::Status(probed.status().code(),
                          absl::StrCat("--gpus: ", probed.status().message()));
    }
    if (probed.status().code() != absl::StatusCode::kUnimplemented) {
      *warning = absl::StrCat("no GPU used: ", probed.status().message());
    }
    return std::vector<GpuInfo>();
  }
  return SelectGpus(*request, *probed, cuda_visible_devices != nullptr,
                    cuda_visible_devices != nullptr ? cuda_visible_devices : "");
}

std::vector<v1::Device> GpuDevices(const std::vector<GpuInfo>& gpus) {
  std::vector<v1::Device> out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    v1::Device d;
    d.set_kind(v1::Device::GPU);
    d.set_index(static_cast<int>(i));
    d.set_name(absl::StrCat("GPU:", i));
    d.set_memory_bytes(gpus[i].memory_bytes);
    d.set_product(gpus[i].product);
    d.set_compute_capability(absl::StrCat(gpus[i].compute_major, ".", gpus[i].compute_minor));
    d.set_pci_bus_id(gpus[i].pci_bus_id);
    out.push_back(std::move(d));
  }
  return out;
}

std::string DescribeGpus(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "no GPU";
  std::vector<std::string> parts;
  for (const GpuInfo& g : gpus) {
    parts.push_back(absl::StrCat(g.ordinal, " ", g.product, " (sm_", g.compute_major,
                                 g.compute_minor, ", ", g.pci_bus_id, ")"));
  }
  return absl::StrCat(gpus.size(), " GPU(s): ", absl::StrJoin(parts, ", "));
}

std::string DescribeOffered(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "no GPU";
  std::vector<std::string> parts;
  for (size_t i = 0; i < gpus.size(); ++i) {
    parts.push_back(absl::StrCat("/gpu:", i, " = CUDA device ", gpus[i].ordinal, " (",
                                 gpus[i].product, ", ", gpus[i].pci_bus_id, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace lockstep::worker
