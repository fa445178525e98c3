#include "engine/gpu/input_stager.h"

#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"

namespace lockstep::engine::gpu {
namespace {

constexpr size_t kAlign = 256;  // each component's offset in a slot's pinned buffer

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

struct InputStager::State {
  // What only the holder of a busy slot (the producer, between Stage's pick and its return)
  // touches; `busy` itself is guarded by `mu`.
  struct Slot {
    char* pinned = nullptr;
    size_t pinned_bytes = 0;
    std::vector<std::shared_ptr<char>> device;  // one buffer per component
    std::vector<size_t> device_bytes;
    bool copied_recorded = false;
  };

  State(DeviceContext* c, CudaStream s, std::vector<CudaEvent> cp, std::vector<CudaEvent> rel)
      : context(c),
        copy_stream(s),
        copied(std::move(cp)),
        released(std::move(rel)),
        slots(copied.size()),
        busy(copied.size(), false),
        released_recorded(copied.size(), false) {}

  ~State() {
    CudaApi& api = context->api();
    (void)api.SetDevice(context->device());
    // HostFree and Free wait for the device: no copy still reads a pinned buffer, no kernel
    // a device one.
    for (Slot& s : slots) {
      (void)api.HostFree(s.pinned);
      s.device.clear();
    }
    for (CudaEvent e : copied) (void)api.EventDestroy(e);
    for (CudaEvent e : released) (void)api.EventDestroy(e);
    (void)api.StreamDestroy(copy_stream);
  }

  // The last tensor of a staged batch went: the compute stream's reads of it are enqueued, so
  // the slot's next copy waits for them (copy stream) and the slot is free.
  void Release(int k) {
    CudaApi& api = context->api();
    absl::Status s = api.SetDevice(context->device());
    if (s.ok()) s = api.EventRecord(released[k], context->stream());
    absl::MutexLock lock(&mu);
    if (s.ok()) {
      released_recorded[k] = true;
    } else {
      release_error.Update(s);
    }
    busy[k] = false;
  }

  DeviceContext* const context;
  const CudaStream copy_stream;
  const std::vector<CudaEvent> copied;    // per slot, on the copy stream
  const std::vector<CudaEvent> released;  // per slot, on the compute stream
  std::vector<Slot> slots;

  absl::Mutex mu;
  std::vector<bool> busy ABSL_GUARDED_BY(mu);
  std::vector<bool> released_recorded ABSL_GUARDED_BY(mu);
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  absl::Status release_error ABSL_GUARDED_BY(mu);
};

// Held by every tensor of one staged batch; gives the slot back when the last goes.
struct InputStager::Lease {
  Lease(std::shared_ptr<State> s, int k) : state(std::move(s)), slot(k) {}
  ~Lease() { state->Release(slot); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  const std::shared_ptr<State> state;
  const int slot;
};

absl::StatusOr<std::unique_ptr<InputStager>> InputStager::Create(DeviceContext* context,
                                                                 int slots) {
  if (context == nullptr || slots < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InputStager: needs a device context and at least 1 slot, got ", slots));
  }
  CudaApi& api = context->api();
  LS_RETURN_IF_ERROR(api.SetDevice(context->device()));
  LS_ASSIGN_OR_RETURN(CudaStream stream, api.StreamCreate());
  std::vector<CudaEvent> copied, released;
  absl::Status status;
  for (int k = 0; k < slots && status.ok(); ++k) {
    absl::StatusOr<CudaEvent> a = api.EventCreate();
    absl::StatusOr<CudaEvent> b = api.EventCreate();
    if (a.ok()) copied.push_back(*a);
    if (b.ok()) released.push_back(*b);
    status.Update(a.status());
    status.Update(b.status());
  }
  if (!status.ok()) {
    for (CudaEvent e : copied) (void)api.EventDestroy(e);
    for (CudaEvent e : released) (void)api.EventDestroy(e);
    (void)api.StreamDestroy(stream);
    return absl::Status(status.code(), absl::StrCat("InputStager on GPU ", context->device(), ": ",
                                                    status.message()));
  }
  return std::unique_ptr<InputStager>(new InputStager(
      std::make_shared<State>(context, stream, std::move(copied), std::move(released))));
}

InputStager::~InputStager() { Cancel(); }

void InputStager::Cancel() {
  absl::MutexLock lock(&state_->mu);
  state_->cancelled = true;
}

int InputStager::slots() const { return static_cast<int>(state_->copied.size()); }

int InputStager::busy_slots() const {
  absl::MutexLock lock(&state_->mu);
  int n = 0;
  for (bool b : state_->busy) n += b ? 1 : 0;
  return n;
}

absl::Status InputStager::Ready(int slot) {
  if (slot < 0 || slot >= slots()) {
    return absl::InvalidArgumentError(absl::StrCat("InputStager::Ready: no slot ", slot));
  }
  CudaApi& api = state_->context->api();
  LS_RETURN_IF_ERROR(api.SetDevice(state_->context->device()));
  return api.StreamWaitEvent(state_->context->stream(), state_->copied[slot]);
}

absl::StatusOr<InputStager::Staged> InputStager::Stage(const std::vector<Tensor>& components,
                                                       int64_t begin, int64_t end) {
  State& st = *state_;
  for (size_t c = 0; c < components.size(); ++c) {
    const Tensor& t = components[c];
    if (!t.valid() || !t.on_host() || t.shape().rank() < 1 || begin < 0 || begin > end ||
        end > t.shape().dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InputStager::Stage: component ", c, " (", t.valid() ? t.DebugString() : "null",
          ") is not a host batch holding rows [", begin, ", ", end, ")"));
    }
  }
  int k = -1;
  {
    absl::MutexLock lock(&st.mu);
    st.mu.Await(absl::Condition(
        +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
          if (s->cancelled) return true;
          for (bool b : s->busy) {
            if (!b) return true;
          }
          return false;
        },
        &st));
    if (st.cancelled) return absl::CancelledError("InputStager::Stage: cancelled");
    if (!st.release_error.ok()) return st.release_error;
    for (size_t i = 0; i < st.busy.size(); ++i) {
      if (!st.busy[i]) {
        k = static_cast<int>(i);
        break;
      }
    }
    st.busy[k] = true;
  }
  absl::StatusOr<Staged> staged = Fill(k, components, begin, end);
  if (!staged.ok()) {
    absl::MutexLock lock(&st.mu);
    st.busy[k] = false;
    return absl::Status(
        staged.status().code(),
        absl::StrCat("InputStager on GPU ", st.context->device(), ": ", staged.status().message()));
  }
  return staged;
}

absl::StatusOr<InputStager::Staged> InputStager::Fill(int k, const std::vector<Tensor>& components,
                                                      int64_t begin, int64_t end) {
  State& st = *state_;
  State::Slot& slot = st.slots[k];
  CudaApi& api = st.context->api();
  LS_RETURN_IF_ERROR(api.SetDevice(st.context->device()));
  // The slot's previous copy must have read the pinned buffer before it is refilled.
  if (slot.copied_recorded) LS_RETURN_IF_ERROR(api.EventSynchronize(st.copied[k]));
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  for (const Tensor& t : components) {
    const int64_t rows = t.shape().dim(0);
    const size_t row_bytes = rows == 0 ? 0 : t.num_bytes() / rows;
    bytes.push_back(static_cast<size_t>(end - begin) * row_bytes);
    offsets.push_back(total);
    total += Aligned(bytes.back());
  }
  if (total > slot.pinned_bytes) {
    LS_RETURN_IF_ERROR(api.HostFree(slot.pinned));
    slot.pinned = nullptr;
    slot.pinned_bytes = 0;
    LS_ASSIGN_OR_RETURN(void* p, api.HostAlloc(total));
    slot.pinned = static_cast<char*>(p);
    slot.pinned_bytes = total;
  }
  // The first batch sizes every slot: the slots never staged yet get their device buffers now,
  // before the first step computes, so a job's device peak is reached by step 1 whatever the
  // producer's pace (only a larger batch grows it later). Such a slot was never handed out, so
  // only this producer thread touches it.
  for (size_t j = 0; j < st.slots.size(); ++j) {
    State::Slot& other = st.slots[j];
    if (static_cast<int>(j) == k || !other.device.empty()) continue;
    other.device.resize(components.size());
    other.device_bytes.assign(components.size(), 0);
    for (size_t c = 0; c < components.size(); ++c) {
      const size_t want = bytes[c] == 0 ? 1 : bytes[c];
      LS_ASSIGN_OR_RETURN(other.device[c], st.context->AllocateOutside(want));
      other.device_bytes[c] = want;
    }
  }
  slot.device.resize(components.size());
  slot.device_bytes.resize(components.size(), 0);
  for (size_t c = 0; c < components.size(); ++c) {
    const Tensor& t = components[c];
    if (bytes[c] > 0) {
      const size_t row_bytes = bytes[c] / static_cast<size_t>(end - begin);
      std::memcpy(slot.pinned + offsets[c],
                  static_cast<const char*>(t.raw_data()) + begin * row_bytes, bytes[c]);
    }
    if (slot.device[c] == nullptr || slot.device_bytes[c] < bytes[c]) {
      // Device memory outside the compute stream's cache (the copy stream writes it, and
      // the cache's blocks are ordered on the compute stream only), counted in its
      // statistics: a job's reported peak includes its input slots. Free waits for the
      // device (the old buffer's last reads).
      slot.device[c].reset();
      const size_t want = bytes[c] == 0 ? 1 : bytes[c];
      LS_ASSIGN_OR_RETURN(slot.device[c], st.context->AllocateOutside(want));
      slot.device_bytes[c] = want;
    }
  }
  bool after_release;
  {
    absl::MutexLock lock(&st.mu);
    after_release = st.released_recorded[k];
  }
  // The compute stream's reads of the slot's previous batch come first.
  if (after_release) LS_RETURN_IF_ERROR(api.StreamWaitEvent(st.copy_stream, st.released[k]));
  for (size_t c = 0; c < components.size(); ++c) {
    LS_RETURN_IF_ERROR(api.MemcpyAsync(slot.device[c].get(), slot.pinned + offsets[c], bytes[c],
                                       CopyKind::kHostToDevice, st.copy_stream));
  }
  LS_RETURN_IF_ERROR(api.EventRecord(st.copied[k], st.copy_stream));
  slot.copied_recorded = true;
  auto lease = std::make_shared<Lease>(state_, k);
  Staged out;
  out.slot = k;
  const Device device(Device::Type::kCuda, st.context->index());
  for (size_t c = 0; c < components.size(); ++c) {
    std::vector<int64_t> dims = components[c].shape().dims();
    dims[0] = end - begin;
    out.tensors.emplace_back(components[c].dtype(), Shape(dims),
                             std::shared_ptr<char>(lease, slot.device[c].get()), device);
  }
  return out;
}

}  // namespace lockstep::engine::gpu
