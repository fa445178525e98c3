// GPU selection for lockstepd: which of the GPUs the CUDA runtime shows this process (after
// CUDA_VISIBLE_DEVICES) the worker offers, from its --gpus flag, and how they are registered
// with the coordinator (v1::Device). Pure functions over GpuInfo, so that they are tested in
// the CPU-only build; gpu_probe.h fills GpuInfo from the driver. Stateless; thread-safe.
#ifndef LOCKSTEP_WORKER_GPU_GPU_SELECTION_H_
#define LOCKSTEP_WORKER_GPU_GPU_SELECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lockstep/v1/cluster.pb.h"

namespace lockstep::worker {

// One GPU as the CUDA runtime reports it.
struct GpuInfo {
  int ordinal = 0;           // CUDA device number in this process (after CUDA_VISIBLE_DEVICES)
  std::string product;       // "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;  // total device memory
  int compute_major = 0;     // compute capability 9.0: 9 and 0
  int compute_minor = 0;
  std::string pci_bus_id;  // "0000:18:00.0"
};

// What --gpus asks for: every visible GPU (empty flag or "all"), none ("none"), or the listed
// CUDA device numbers ("0,1"), which count among the GPUs CUDA_VISIBLE_DEVICES leaves visible.
// Whatever the numbers, the worker names the GPUs it offers by position, as TensorFlow does:
// the i-th offered GPU is its /gpu:i, on its own CUDA ordinal (--gpus=1,3: /gpu:0 is CUDA
// device 1, /gpu:1 CUDA device 3; the same names as CUDA_VISIBLE_DEVICES=1,3 gives).
struct GpuRequest {
  enum class Mode { kAll, kNone, kList };
  Mode mode = Mode::kAll;
  bool explicit_flag = false;  // --gpus was given: failing to find GPUs is then an error
  std::vector<int> ordinals;   // kList, in the order given
};

// INVALID_ARGUMENT naming --gpus for a word that is not all/none/a number, a negative or
// repeated number.
absl::StatusOr<GpuRequest> ParseGpuFlag(absl::string_view flag);

// The GPUs the worker offers, in request order (kAll: every visible one; kNone: none).
// NOT_FOUND when a listed GPU is not visible, or when --gpus asks for GPUs and none is
// visible; the message lists the visible GPUs and quotes CUDA_VISIBLE_DEVICES
// (`cuda_visible_devices`: its value; `cuda_visible_set`: whether it is set).
absl::StatusOr<std::vector<GpuInfo>> SelectGpus(const GpuRequest& request,
                                                const std::vector<GpuInfo>& visible,
                                                bool cuda_visible_set,
                                                absl::string_view cuda_visible_devices);

// What lockstepd offers: --gpus (`flag`) applied to what the probe found (`probed`,
// ProbeGpus()) and CUDA_VISIBLE_DEVICES (`cuda_visible_devices`, null when unset). Without
// --gpus, a failed probe means no GPU: silently in a build without CUDA (UNIMPLEMENTED), with
// `*warning` set otherwise (no driver, say). With --gpus, a failed probe is the error, prefixed
// with "--gpus: ". Errors of ParseGpuFlag and SelectGpus otherwise.
absl::StatusOr<std::vector<GpuInfo>> OfferedGpus(absl::string_view flag,
                                                 const absl::StatusOr<std::vector<GpuInfo>>& probed,
                                                 const char* cuda_visible_devices,
                                                 std::string* warning);

// The registration of the selected GPUs: kind GPU, index 0..n-1 (the worker's /gpu:N),
// name "GPU:N", memory, product, compute capability "9.0" and PCI bus id.
std::vector<v1::Device> GpuDevices(const std::vector<GpuInfo>& gpus);

// "2 GPU(s): 0 NVIDIA H100 80GB HBM3 (sm_90, 0000:18:00.0), 1 ...", or "no GPU".
std::string DescribeGpus(const std::vector<GpuInfo>& gpus);

// The worker's names of the GPUs it offers: "/gpu:0 = CUDA device 1 (NVIDIA H200,
// 0000:11:00.0), /gpu:1 = CUDA device 3 (...)", or "no GPU".
std::string DescribeOffered(const std::vector<GpuInfo>& gpus);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_WORKER_GPU_GPU_SELECTION_H_
