// FakeCudaApi: CudaApi without a GPU, strict where a GPU punishes mistakes, so that code above
// the seam fails here the way it would fail on a GPU:
//   - Device memory is a memfd mapped twice per device: the addresses handed out lie in a
//     PROT_NONE mapping (a host dereference of a device pointer dies with SIGSEGV), and the
//     fake's copies and emulated kernels use a second, read-write mapping (HostView).
//   - Streams are lazy: nothing enqueued runs until the stream is synchronised, or an event
//     recorded after it is synchronised or waited on by a stream that runs. A missing
//     synchronisation therefore reads stale data every time, not once in a thousand runs.
//     Host buffers of copies are read and written when the copy runs, not when it is enqueued.
//     EventQuery is the fake GPU getting there: it runs the event's stream up to the event
//     and answers true (a kernel fault in that work is its error); it is not a host wait.
//   - Injection: FailAllocation(n) fails the n-th allocation from now with RESOURCE_EXHAUSTED;
//     InjectStickyError makes every later call fail with INTERNAL, as a CUDA context does after
//     a kernel fault.
//   - Pinned host memory (HostAlloc) is ordinary memory the fake keeps a list of, so that it
//     can count what a GPU would make slow: Counters() says how many bytes every copy moved
//     to or from pageable host memory and from or to pinned memory, and how often the host
//     waited for a stream or an event (a profile of where a step serialises host and device).
//   - Timing events measure no time: EventElapsedMs counts the work between them (below).
//   - The stream-ordered pool: FreeAsync(p, s) gives p back at once for MallocAsync on s (the
//     stream order makes it safe) and to everyone when s has run the free; PoolStats count
//     MallocAsync bytes (rounded up to 256), with their peak.
//
// Emulated kernels (engine/kernels/gpu) are enqueued with Launch and read and write through
// HostView. Ownership: owns the mappings, streams and events; device pointers stay valid until
// freed or the fake is destroyed. Thread model: thread-safe; one mutex, held while enqueued
// work runs (work must not call back into the fake, except HostView, which takes no lock).
#ifndef LOCKSTEP_COMMON_CUDA_FAKE_CUDA_API_H_
#define LOCKSTEP_COMMON_CUDA_FAKE_CUDA_API_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/cuda/cuda_api.h"

namespace lockstep {

class FakeCudaApi final : public CudaApi {
 public:
  struct Options {
    int device_count = 1;
    size_t memory_bytes = size_t{64} << 20;  // per device
    std::string name = "Lockstep FakeCudaApi";
    int multiprocessor_count = 132;
  };
  // INVALID_ARGUMENT for no devices or no memory; INTERNAL naming memfd_create or mmap when the
  // kernel refuses them.
  static absl::StatusOr<std::unique_ptr<FakeCudaApi>> Create(Options options);
  static absl::StatusOr<std::unique_ptr<FakeCudaApi>> Create() { return Create(Options()); }
  ~FakeCudaApi() override;

  absl::StatusOr<int> DeviceCount() override;
  absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) override;
  absl::Status SetDevice(int device) override;
  absl::StatusOr<int> GetDevice() override;
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  absl::Status Free(void* device_ptr) override;
  absl::StatusOr<void*> MallocAsync(size_t bytes, CudaStream stream) override;
  absl::Status FreeAsync(void* device_ptr, CudaStream stream) override;
  absl::StatusOr<PoolStats> GetPoolStats(int device) override;
  absl::Status ResetPoolPeak(int device) override;
  absl::StatusOr<void*> HostAlloc(size_t bytes) override;
  absl::Status HostFree(void* host_ptr) override;
  absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                           CudaStream stream) override;
  absl::Status MemsetAsync(void* device_ptr, int value, size_t bytes, CudaStream stream) override;
  absl::StatusOr<CudaStream> StreamCreate() override;
  absl::Status StreamDestroy(CudaStream stream) override;
  absl::Status StreamSynchronize(CudaStream stream) override;
  absl::StatusOr<CudaEvent> EventCreate() override;
  absl::Status EventRecord(CudaEvent event, CudaStream stream) override;
  absl::Status StreamWaitEvent(CudaStream stream, CudaEvent event) override;
  absl::Status EventSynchronize(CudaEvent event) override;
  absl::StatusOr<bool> EventQuery(CudaEvent event) override;
  absl::Status EventDestroy(CudaEvent event) override;
  absl::StatusOr<CudaEvent> TimingEventCreate() override;
  // Deterministic, not a clock: the number of pieces of work (launches, copies, memsets,
  // event waits) `end`'s stream ran after `start`'s capture up to `end`'s, as milliseconds,
  // so a profile on the fake counts what each segment enqueued; 0 for events recorded on two
  // streams. Errors as CudaApi's (FAILED_PRECONDITION until that work has run).
  absl::StatusOr<float> EventElapsedMs(CudaEvent start, CudaEvent end) override;

  // A kernel launch: `work` runs when the stream runs it (see above). `what` names the kernel
  // in errors. Fails like the other calls (sticky error, bad stream). An error `work` returns
  // is a kernel fault: it becomes the sticky error, and the synchronisation that ran it (and
  // every later call) fails with it, as on a GPU.
  absl::Status Launch(CudaStream stream, absl::string_view what,
                      std::function<absl::Status()> work);
  // The view of [device_ptr, device_ptr + bytes), which must lie in one live allocation;
  // INVALID_ARGUMENT naming `call` and `role` otherwise (for launches to check their buffers).
  absl::StatusOr<void*> HostRange(const void* device_ptr, size_t bytes, absl::string_view call,
                                  absl::string_view role);
  // Where host code may read and write the device memory at `device_ptr` (for emulated
  // kernels and tests only); null when it is no device memory of this fake. Takes no lock.
  void* HostView(const void* device_ptr) const;
  template <typename T>
  T* HostView(T* device_ptr) const {
    return static_cast<T*>(HostView(static_cast<const void*>(device_ptr)));
  }

  // The n-th allocation (Malloc or MallocAsync of > 0 bytes) from now fails with
  // RESOURCE_EXHAUSTED; n = 1 is the next one.
  void FailAllocation(int n);
  // Every later call fails with INTERNAL naming `fault` (e.g. "an illegal memory access").
  void InjectStickyError(std::string fault);
  // What the calls so far moved and waited for (see above); they only grow.
  struct Counters {
    uint64_t pageable_copy_bytes = 0;  // host<->device copies of pageable host memory
    uint64_t pinned_copy_bytes = 0;    // host<->device copies of HostAlloc memory
    int64_t pageable_copies = 0;
    int64_t pinned_copies = 0;
    int64_t host_waits = 0;       // StreamSynchronize and EventSynchronize calls
    int64_t events_recorded = 0;  // EventRecord calls, timing events' included
    int64_t timing_events_created = 0;
  };
  Counters counters() const;
  // Work enqueued on `stream` that has not run yet (tests).
  absl::StatusOr<int> PendingWork(CudaStream stream);

 private:
  // One device's memory: the PROT_NONE mapping (handed out) and the read-write view.
  struct Arena {
    int fd = -1;
    char* device_base = nullptr;
    char* view_base = nullptr;
    size_t size = 0;
    std::map<size_t, size_t> free_blocks;  // offset -> bytes, coalesced
  };
  struct Allocation {
    int device = 0;
    size_t bytes = 0;  // rounded up to kAlignment
    bool pooled = false;
  };
  struct Stream {
    int device = 0;
    bool destroyed = false;
    std::deque<std::function<absl::Status()>> pending;
    uint64_t enqueued = 0;  // work ever enqueued
    uint64_t done = 0;      // work ever run
    // Freed with FreeAsync on this stream, the free not run yet: MallocAsync here reuses it.
    std::map<uintptr_t, Allocation> reusable;
  };
  struct Event {
    Stream* stream = nullptr;  // where it was last recorded; null: never (complete)
    uint64_t at = 0;           // the stream's work count when recorded
    bool timing = false;       // TimingEventCreate's
  };
  struct Pool {
    uint64_t in_use = 0;
    uint64_t peak = 0;
    uint64_t cached = 0;  // bytes in Stream::reusable lists
  };
  static constexpr size_t kAlignment = 256;

  explicit FakeCudaApi(Options options) : options_(std::move(options)) {}
  absl::Status Usable(absl::string_view call) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckDevice(int device, absl::string_view call) const;
  int CurrentDevice() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Stream*> FindStream(CudaStream stream, absl::string_view call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Event*> FindEvent(CudaEvent event, absl::string_view call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The view of [ptr, ptr + bytes), which must lie in one live allocation.
  absl::StatusOr<char*> DeviceRange(const void* ptr, size_t bytes, absl::string_view call,
                                    absl::string_view role) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether [p, p + bytes) lies in one HostAlloc buffer.
  bool Pinned(const void* p, size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<void*> Allocate(int device, size_t bytes, bool pooled, absl::string_view call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(uintptr_t address, const Allocation& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(Stream* s, std::function<absl::Status()> work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `s`'s work until `upto` pieces have run (a piece that waits on an event first runs
  // the event's stream that far). Work that fails sets the sticky error; nothing runs after.
  void Drain(Stream* s, uint64_t upto) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::vector<Arena> arenas_;  // per device; the mappings never change after Create
  mutable absl::Mutex mu_;
  std::map<uintptr_t, Allocation> allocations_ ABSL_GUARDED_BY(mu_);   // live, by address
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);  // kept after destroy
  std::vector<Stream*> default_streams_ ABSL_GUARDED_BY(mu_);          // per device
  absl::flat_hash_map<Event*, std::unique_ptr<Event>> events_ ABSL_GUARDED_BY(mu_);
  std::vector<Pool> pools_ ABSL_GUARDED_BY(mu_);  // per device
  absl::flat_hash_map<std::thread::id, int> current_device_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, size_t> pinned_ ABSL_GUARDED_BY(mu_);  // HostAlloc's, by address
  Counters counters_ ABSL_GUARDED_BY(mu_);
  int fail_countdown_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no injected failure pending
  std::optional<std::string> sticky_fault_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_FAKE_CUDA_API_H_
