// InputStager: puts a replica's input batches on its GPU ahead of the compute stream, as
// tf.data's prefetch_to_device and PyTorch's pinned-memory loaders do. A batch's rows are
// copied once on the host, into a page-locked (CudaApi::HostAlloc) buffer, and from there to
// device memory on a copy stream of the stager's own, so that the copy of step N+1's input
// runs on the DMA engine while step N computes; nothing on the step's path waits for it on
// the host.
//
// Slots: the stager owns `slots` of them, each a pinned buffer and device buffers for one
// batch (every slot's device buffers made at the first Stage, sized by its batch; grown to the
// largest batch seen, then reused: no allocation per step). The device
// buffers are not the compute stream's cached blocks, which are ordered on that stream alone:
// they come from DeviceContext::AllocateOutside (CudaApi::Malloc), which counts them in the
// allocator's statistics, so a job's reported device peak includes its input slots (as
// torch's max_memory_allocated includes the batch). Stage fills a
// free slot and returns device tensors over its memory; the slot is free again when the last
// of those tensors goes. Stage blocks while every slot is staged or held (the bound on memory
// and on how far the producer runs ahead), until one is released or Cancel is called.
//
// Ordering (two streams, two events per slot):
//   copy stream:    wait(released) -> H2D copies from pinned -> record(copied)
//   compute stream: ... Ready(slot): wait(copied) -> the step's kernels read the batch ...
//                   release of the batch's tensors: record(released)
// The consumer must call Ready before it enqueues work that reads a staged batch: without
// it the compute stream reads whatever the slot held (on FakeCudaApi, whose streams are
// lazy, that is stale data every time). Before a slot's pinned buffer is refilled the host
// waits for its previous copy (EventSynchronize on the producer's thread, off the step's
// path).
//
// Errors: Stage answers CANCELLED after Cancel, INVALID_ARGUMENT for a component that is not
// a host tensor or a row range outside it, and the CudaApi's errors (naming the GPU:
// RESOURCE_EXHAUSTED when a slot's memory cannot be had); an error recording a release is
// kept and answered by the next Stage.
//
// Ownership: borrows the GpuDevice's context (it must outlive every staged tensor, as for
// every device tensor). The slots' memory lives until the stager and every tensor it handed
// out are gone. Thread model: Stage and Cancel from one producer thread (Cancel from any);
// Ready from the thread that drives the compute stream; tensors may be released on any.
#ifndef LOCKSTEP_ENGINE_GPU_INPUT_STAGER_H_
#define LOCKSTEP_ENGINE_GPU_INPUT_STAGER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gpu/device_context.h"
#include "engine/tensor.h"

namespace lockstep::engine::gpu {

class InputStager {
 public:
  // One staged batch: device tensors (one per component) and the slot they live in.
  struct Staged {
    std::vector<Tensor> tensors;
    int slot = -1;
  };

  // INVALID_ARGUMENT for fewer than 1 slot; the CudaApi's errors making the copy stream.
  static absl::StatusOr<std::unique_ptr<InputStager>> Create(DeviceContext* context, int slots);
  ~InputStager();
  InputStager(const InputStager&) = delete;
  InputStager& operator=(const InputStager&) = delete;

  // Rows [begin, end) of every host tensor of `components` (each batched along axis 0) into a
  // free slot, their copies to the device enqueued on the copy stream. Blocks for a slot.
  absl::StatusOr<Staged> Stage(const std::vector<Tensor>& components, int64_t begin, int64_t end);
  // Orders the compute stream after the copies of `slot` (a Staged's).
  absl::Status Ready(int slot);
  // Every Stage waiting for a slot, and every later one, answers CANCELLED.
  void Cancel();

  int slots() const;
  // Slots staged or held now (tests).
  int busy_slots() const;

 private:
  struct State;
  struct Lease;
  explicit InputStager(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Stage's work on slot `k`, which it holds.
  absl::StatusOr<Staged> Fill(int k, const std::vector<Tensor>& components, int64_t begin,
                              int64_t end);

  std::shared_ptr<State> state_;  // shared with the leases of handed-out tensors
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_INPUT_STAGER_H_
