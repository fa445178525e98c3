// FakeCudaApi: the whole CudaApi surface (memory views, lazy streams, events, the pool,
// pinned memory, injected errors) in one file over 600 lines on purpose: each call's fake
// semantics depend on the same stream and view bookkeeping, which a split would scatter.
#include "common/cuda/fake_cuda_api.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {
namespace {

std::string Ptr(const void* p) { return absl::StrFormat("%p", p); }

const char* KindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "HostToDevice";
    case CopyKind::kDeviceToHost:
      return "DeviceToHost";
    case CopyKind::kDeviceToDevice:
      return "DeviceToDevice";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeCudaApi>> FakeCudaApi::Create(Options options) {
  if (options.device_count < 1 || options.memory_bytes < kAlignment) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FakeCudaApi::Create: ", options.device_count, " devices of ", options.memory_bytes,
        " bytes; want at least 1 device of at least ", kAlignment, " bytes"));
  }
  std::unique_ptr<FakeCudaApi> api(new FakeCudaApi(options));
  const size_t size = (options.memory_bytes + kAlignment - 1) / kAlignment * kAlignment;
  for (int d = 0; d < options.device_count; ++d) {
    Arena arena;
    arena.size = size;
    arena.fd = memfd_create(absl::StrCat("lockstep-fake-gpu-", d).c_str(), MFD_CLOEXEC);
    if (arena.fd < 0) {
      return absl::InternalError(
          absl::StrCat("FakeCudaApi::Create: memfd_create: ", std::strerror(errno)));
    }
    api->arenas_.push_back(arena);  // the destructor closes it from here on
    if (ftruncate(arena.fd, size) != 0) {
      return absl::InternalError(
          absl::StrCat("FakeCudaApi::Create: ftruncate(", size, " bytes): ", std::strerror(errno)));
    }
    void* device = mmap(nullptr, size, PROT_NONE, MAP_SHARED, arena.fd, 0);
    void* view = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, arena.fd, 0);
    if (device == MAP_FAILED || view == MAP_FAILED) {
      return absl::InternalError(absl::StrCat("FakeCudaApi::Create: mmap of ", size,
                                              " bytes of device ", d, ": ", std::strerror(errno)));
    }
    api->arenas_.back().device_base = static_cast<char*>(device);
    api->arenas_.back().view_base = static_cast<char*>(view);
    api->arenas_.back().free_blocks[0] = size;
  }
  absl::MutexLock lock(&api->mu_);
  api->pools_.resize(options.device_count);
  for (int d = 0; d < options.device_count; ++d) {
    api->streams_.push_back(std::make_unique<Stream>());
    api->streams_.back()->device = d;
    api->default_streams_.push_back(api->streams_.back().get());
  }
  return api;
}

FakeCudaApi::~FakeCudaApi() {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [address, bytes] : pinned_) std::free(reinterpret_cast<void*>(address));
  }
  for (Arena& a : arenas_) {
    if (a.device_base != nullptr) munmap(a.device_base, a.size);
    if (a.view_base != nullptr) munmap(a.view_base, a.size);
    if (a.fd >= 0) close(a.fd);
  }
}

absl::Status FakeCudaApi::Usable(absl::string_view call) const {
  if (!sticky_fault_.has_value()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("CudaApi::", call, ": the CUDA context is unusable after ", *sticky_fault_,
                   " (a sticky error, as after a kernel fault: every call fails until the "
                   "process exits)"));
}

absl::Status FakeCudaApi::CheckDevice(int device, absl::string_view call) const {
  if (device >= 0 && device < options_.device_count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, "(", device, "): no device ",
                                                 device, " (there are ", options_.device_count,
                                                 ")"));
}

int FakeCudaApi::CurrentDevice() const {
  auto it = current_device_.find(std::this_thread::get_id());
  return it == current_device_.end() ? 0 : it->second;
}

absl::StatusOr<FakeCudaApi::Stream*> FakeCudaApi::FindStream(CudaStream stream,
                                                             absl::string_view call) {
  if (stream == nullptr) return default_streams_[CurrentDevice()];
  for (const std::unique_ptr<Stream>& s : streams_) {
    if (reinterpret_cast<CudaStream>(s.get()) == stream && !s->destroyed) return s.get();
  }
  return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, ": stream ", Ptr(stream),
                                                 " is not a live stream (destroyed?)"));
}

absl::StatusOr<FakeCudaApi::Event*> FakeCudaApi::FindEvent(CudaEvent event,
                                                           absl::string_view call) {
  auto it = events_.find(reinterpret_cast<Event*>(event));
  if (event == nullptr || it == events_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, ": event ", Ptr(event),
                                                   " is not a live event (null or destroyed)"));
  }
  return it->second.get();
}

absl::StatusOr<char*> FakeCudaApi::DeviceRange(const void* ptr, size_t bytes,
                                               absl::string_view call,
                                               absl::string_view role) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(p);
  if (ptr == nullptr || it == allocations_.begin()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::", call, ": ", role, " ", Ptr(ptr), " is not device memory"));
  }
  --it;
  const uintptr_t start = it->first;
  if (p >= start + it->second.bytes || p + bytes > start + it->second.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaApi::", call, ": ", role, " [", Ptr(ptr), ", +", bytes,
        " bytes) is not inside one live allocation (the nearest below starts at ",
        Ptr(reinterpret_cast<void*>(start)), " and has ", it->second.bytes, " bytes)"));
  }
  return static_cast<char*>(HostView(ptr));
}

void* FakeCudaApi::HostView(const void* device_ptr) const {
  const char* p = static_cast<const char*>(device_ptr);
  for (const Arena& a : arenas_) {
    if (p >= a.device_base && p < a.device_base + a.size) return a.view_base + (p - a.device_base);
  }
  return nullptr;
}

absl::StatusOr<void*> FakeCudaApi::Allocate(int device, size_t bytes, bool pooled,
                                            absl::string_view call) {
  if (bytes == 0) return nullptr;
  if (fail_countdown_ > 0 && --fail_countdown_ == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("CudaApi::", call, "(", bytes, " bytes) on device ", device,
                     ": out of memory (injected by FakeCudaApi::FailAllocation)"));
  }
  Arena& arena = arenas_[device];
  if (bytes > arena.size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("CudaApi::", call, "(", bytes, " bytes) on device ", device,
                     ": out of memory: the device has ", arena.size, " bytes"));
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  for (auto it = arena.free_blocks.begin(); it != arena.free_blocks.end(); ++it) {
    if (it->second < rounded) continue;
    const size_t offset = it->first, left = it->second - rounded;
    arena.free_blocks.erase(it);
    if (left > 0) arena.free_blocks[offset + rounded] = left;
    const uintptr_t address = reinterpret_cast<uintptr_t>(arena.device_base + offset);
    allocations_[address] = Allocation{device, rounded, pooled};
    return reinterpret_cast<void*>(address);
  }
  size_t largest = 0;
  for (const auto& [offset, size] : arena.free_blocks) largest = std::max(largest, size);
  return absl::ResourceExhaustedError(
      absl::StrCat("CudaApi::", call, "(", bytes, " bytes) on device ", device,
                   ": out of memory: the largest free block has ", largest, " bytes"));
}

void FakeCudaApi::Release(uintptr_t address, const Allocation& a) {
  Arena& arena = arenas_[a.device];
  size_t offset = reinterpret_cast<char*>(address) - arena.device_base;
  size_t size = a.bytes;
  auto next = arena.free_blocks.lower_bound(offset);
  if (next != arena.free_blocks.end() && next->first == offset + size) {
    size += next->second;
    next = arena.free_blocks.erase(next);
  }
  if (next != arena.free_blocks.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      arena.free_blocks.erase(prev);
    }
  }
  arena.free_blocks[offset] = size;
}

void FakeCudaApi::Enqueue(Stream* s, std::function<absl::Status()> work) {
  s->pending.push_back(std::move(work));
  ++s->enqueued;
}

void FakeCudaApi::Drain(Stream* s, uint64_t upto) {
  while (s->done < upto && !s->pending.empty() && !sticky_fault_.has_value()) {
    std::function<absl::Status()> work = std::move(s->pending.front());
    s->pending.pop_front();
    ++s->done;
    if (absl::Status status = work(); !status.ok()) sticky_fault_ = status.ToString();
  }
}

void FakeCudaApi::DrainAll() {
  for (const std::unique_ptr<Stream>& s : streams_) Drain(s.get(), s->enqueued);
}

absl::StatusOr<int> FakeCudaApi::DeviceCount() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("DeviceCount"); !s.ok()) return s;
  return options_.device_count;
}

absl::StatusOr<DeviceProperties> FakeCudaApi::GetDeviceProperties(int device) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("GetDeviceProperties"); !s.ok()) return s;
  if (absl::Status s = CheckDevice(device, "GetDeviceProperties"); !s.ok()) return s;
  DeviceProperties p;
  p.name = options_.name;
  p.total_memory = arenas_[device].size;
  p.multiprocessor_count = options_.multiprocessor_count;
  p.compute_major = 9;
  p.compute_minor = 0;
  return p;
}

absl::Status FakeCudaApi::SetDevice(int device) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("SetDevice"); !s.ok()) return s;
  if (absl::Status s = CheckDevice(device, "SetDevice"); !s.ok()) return s;
  current_device_[std::this_thread::get_id()] = device;
  return absl::OkStatus();
}

absl::StatusOr<int> FakeCudaApi::GetDevice() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("GetDevice"); !s.ok()) return s;
  return CurrentDevice();
}

absl::StatusOr<void*> FakeCudaApi::Malloc(size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("Malloc"); !s.ok()) return s;
  return Allocate(CurrentDevice(), bytes, /*pooled=*/false, "Malloc");
}

absl::Status FakeCudaApi::Free(void* device_ptr) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("Free"); !s.ok()) return s;
  if (device_ptr == nullptr) return absl::OkStatus();
  DrainAll();  // cudaFree waits for the device
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(device_ptr));
  if (it == allocations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::Free(", Ptr(device_ptr),
                     "): not the start of a live allocation (freed twice, or not device memory)"));
  }
  if (it->second.pooled) pools_[it->second.device].in_use -= it->second.bytes;
  Release(it->first, it->second);
  allocations_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<void*> FakeCudaApi::MallocAsync(size_t bytes, CudaStream stream) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("MallocAsync"); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, "MallocAsync");
  if (!s.ok()) return s.status();
  if (bytes == 0) return nullptr;
  Pool& pool = pools_[(*s)->device];
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = nullptr;
  // Stream order makes memory freed on this stream safe to reuse here before its free runs.
  for (auto it = (*s)->reusable.begin(); it != (*s)->reusable.end(); ++it) {
    if (it->second.bytes < rounded) continue;
    if (fail_countdown_ > 0 && --fail_countdown_ == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("CudaApi::MallocAsync(", bytes, " bytes) on device ", (*s)->device,
                       ": out of memory (injected by FakeCudaApi::FailAllocation)"));
    }
    pool.cached -= it->second.bytes;
    allocations_[it->first] = it->second;
    p = reinterpret_cast<void*>(it->first);
    (*s)->reusable.erase(it);
    break;
  }
  if (p == nullptr) {
    absl::StatusOr<void*> fresh = Allocate((*s)->device, bytes, /*pooled=*/true, "MallocAsync");
    if (!fresh.ok()) return fresh.status();
    p = *fresh;
  }
  pool.in_use += allocations_[reinterpret_cast<uintptr_t>(p)].bytes;
  pool.peak = std::max(pool.peak, pool.in_use);
  return p;
}

absl::Status FakeCudaApi::FreeAsync(void* device_ptr, CudaStream stream) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("FreeAsync"); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, "FreeAsync");
  if (!s.ok()) return s.status();
  if (device_ptr == nullptr) return absl::OkStatus();
  const uintptr_t address = reinterpret_cast<uintptr_t>(device_ptr);
  auto it = allocations_.find(address);
  if (it == allocations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::FreeAsync(", Ptr(device_ptr),
                     "): not the start of a live allocation (freed twice, or not device memory)"));
  }
  const Allocation a = it->second;
  allocations_.erase(it);
  Stream* on = *s;
  if (!a.pooled) {  // Malloc's memory: released when the stream gets there
    Enqueue(on, [this, address, a]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Release(address, a);
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }
  Pool& pool = pools_[a.device];
  pool.in_use -= a.bytes;
  pool.cached += a.bytes;
  on->reusable[address] = a;
  Enqueue(on, [this, on, address]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto r = on->reusable.find(address);
    if (r == on->reusable.end()) return absl::OkStatus();  // reused by a MallocAsync here
    pools_[r->second.device].cached -= r->second.bytes;
    Release(address, r->second);
    on->reusable.erase(r);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::StatusOr<PoolStats> FakeCudaApi::GetPoolStats(int device) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("GetPoolStats"); !s.ok()) return s;
  if (absl::Status s = CheckDevice(device, "GetPoolStats"); !s.ok()) return s;
  const Pool& p = pools_[device];
  return PoolStats{p.in_use, p.peak, p.in_use + p.cached};
}

absl::Status FakeCudaApi::ResetPoolPeak(int device) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("ResetPoolPeak"); !s.ok()) return s;
  if (absl::Status s = CheckDevice(device, "ResetPoolPeak"); !s.ok()) return s;
  pools_[device].peak = pools_[device].in_use;
  return absl::OkStatus();
}

bool FakeCudaApi::Pinned(const void* p, size_t bytes) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = pinned_.upper_bound(a);
  if (it == pinned_.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

absl::StatusOr<void*> FakeCudaApi::HostAlloc(size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("HostAlloc"); !s.ok()) return s;
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + 4095) / 4096 * 4096;  // whole pages, as page-locking is
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("CudaApi::HostAlloc(", bytes, " bytes): out of host memory"));
  }
  pinned_[reinterpret_cast<uintptr_t>(p)] = rounded;
  return p;
}

absl::Status FakeCudaApi::HostFree(void* host_ptr) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("HostFree"); !s.ok()) return s;
  if (host_ptr == nullptr) return absl::OkStatus();
  auto it = pinned_.find(reinterpret_cast<uintptr_t>(host_ptr));
  if (it == pinned_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::HostFree(", Ptr(host_ptr),
                     "): not the start of a HostAlloc buffer (freed twice, or pageable memory)"));
  }
  DrainAll();  // cudaFreeHost waits for the device: no pending copy may still read it
  std::free(host_ptr);
  pinned_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<CudaEvent> FakeCudaApi::TimingEventCreate() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("TimingEventCreate"); !s.ok()) return s;
  auto event = std::make_unique<Event>();
  event->timing = true;
  Event* e = event.get();
  events_[e] = std::move(event);
  ++counters_.timing_events_created;
  return reinterpret_cast<CudaEvent>(e);
}

absl::StatusOr<float> FakeCudaApi::EventElapsedMs(CudaEvent start, CudaEvent end) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventElapsedMs"); !s.ok()) return s;
  absl::StatusOr<Event*> a = FindEvent(start, "EventElapsedMs");
  if (!a.ok()) return a.status();
  absl::StatusOr<Event*> b = FindEvent(end, "EventElapsedMs");
  if (!b.ok()) return b.status();
  for (const Event* e : {*a, *b}) {
    if (!e->timing) {
      return absl::InvalidArgumentError(
          "CudaApi::EventElapsedMs: an event made without timing (use TimingEventCreate)");
    }
    if (e->stream == nullptr) {
      return absl::InvalidArgumentError("CudaApi::EventElapsedMs: an event was never recorded");
    }
    if (e->stream->done < e->at) {
      return absl::FailedPreconditionError(
          "CudaApi::EventElapsedMs: an event's work has not completed (synchronise first)");
    }
  }
  if ((*a)->stream != (*b)->stream) return 0.0f;
  return static_cast<float>(static_cast<int64_t>((*b)->at) - static_cast<int64_t>((*a)->at));
}

FakeCudaApi::Counters FakeCudaApi::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

absl::Status FakeCudaApi::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                      CudaStream stream) {
  absl::MutexLock lock(&mu_);
  const std::string call = absl::StrCat("MemcpyAsync(", KindName(kind), ", ", bytes, " bytes)");
  if (absl::Status s = Usable(call); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, call);
  if (!s.ok()) return s.status();
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::", call, ": null ", dst == nullptr ? "destination" : "source"));
  }
  char* to = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
  const bool device_dst = kind != CopyKind::kDeviceToHost;
  const bool device_src = kind != CopyKind::kHostToDevice;
  if (device_dst) {
    absl::StatusOr<char*> view = DeviceRange(dst, bytes, call, "destination");
    if (!view.ok()) return view.status();
    to = *view;
  } else if (HostView(dst) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::", call, ": destination ", Ptr(dst), " is device memory"));
  }
  if (device_src) {
    absl::StatusOr<char*> view = DeviceRange(src, bytes, call, "source");
    if (!view.ok()) return view.status();
    from = *view;
  } else if (HostView(src) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::", call, ": source ", Ptr(src), " is device memory"));
  }
  if (kind != CopyKind::kDeviceToDevice) {
    const bool pinned = Pinned(kind == CopyKind::kHostToDevice ? src : dst, bytes);
    (pinned ? counters_.pinned_copy_bytes : counters_.pageable_copy_bytes) += bytes;
    ++(pinned ? counters_.pinned_copies : counters_.pageable_copies);
  }
  Enqueue(*s, [to, from, bytes] {
    std::memmove(to, from, bytes);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status FakeCudaApi::MemsetAsync(void* device_ptr, int value, size_t bytes,
                                      CudaStream stream) {
  absl::MutexLock lock(&mu_);
  const std::string call = absl::StrCat("MemsetAsync(", bytes, " bytes)");
  if (absl::Status s = Usable(call); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, call);
  if (!s.ok()) return s.status();
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<char*> to = DeviceRange(device_ptr, bytes, call, "destination");
  if (!to.ok()) return to.status();
  Enqueue(*s, [to = *to, value, bytes] {
    std::memset(to, value & 0xff, bytes);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::StatusOr<CudaStream> FakeCudaApi::StreamCreate() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("StreamCreate"); !s.ok()) return s;
  streams_.push_back(std::make_unique<Stream>());
  streams_.back()->device = CurrentDevice();
  return reinterpret_cast<CudaStream>(streams_.back().get());
}

absl::Status FakeCudaApi::StreamDestroy(CudaStream stream) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("StreamDestroy"); !s.ok()) return s;
  if (stream == nullptr) {
    return absl::InvalidArgumentError("CudaApi::StreamDestroy: the default stream (null)");
  }
  absl::StatusOr<Stream*> s = FindStream(stream, "StreamDestroy");
  if (!s.ok()) return s.status();
  Drain(*s, (*s)->enqueued);  // enqueued work still runs, as in CUDA
  (*s)->destroyed = true;
  return absl::OkStatus();
}

absl::Status FakeCudaApi::StreamSynchronize(CudaStream stream) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("StreamSynchronize"); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, "StreamSynchronize");
  if (!s.ok()) return s.status();
  ++counters_.host_waits;
  Drain(*s, (*s)->enqueued);
  return Usable("StreamSynchronize");  // a kernel that faulted while it ran
}

absl::StatusOr<CudaEvent> FakeCudaApi::EventCreate() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventCreate"); !s.ok()) return s;
  auto event = std::make_unique<Event>();
  Event* e = event.get();
  events_[e] = std::move(event);
  return reinterpret_cast<CudaEvent>(e);
}

absl::Status FakeCudaApi::EventRecord(CudaEvent event, CudaStream stream) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventRecord"); !s.ok()) return s;
  absl::StatusOr<Event*> e = FindEvent(event, "EventRecord");
  if (!e.ok()) return e.status();
  absl::StatusOr<Stream*> s = FindStream(stream, "EventRecord");
  if (!s.ok()) return s.status();
  (*e)->stream = *s;
  (*e)->at = (*s)->enqueued;
  ++counters_.events_recorded;
  return absl::OkStatus();
}

absl::Status FakeCudaApi::StreamWaitEvent(CudaStream stream, CudaEvent event) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("StreamWaitEvent"); !s.ok()) return s;
  absl::StatusOr<Event*> e = FindEvent(event, "StreamWaitEvent");
  if (!e.ok()) return e.status();
  absl::StatusOr<Stream*> s = FindStream(stream, "StreamWaitEvent");
  if (!s.ok()) return s.status();
  if ((*e)->stream == nullptr) return absl::OkStatus();  // never recorded: complete
  Stream* from = (*e)->stream;
  const uint64_t at = (*e)->at;
  // Streams are kept after destroy, so `from` outlives this work.
  Enqueue(*s, [this, from, at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Drain(from, at);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status FakeCudaApi::EventSynchronize(CudaEvent event) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventSynchronize"); !s.ok()) return s;
  absl::StatusOr<Event*> e = FindEvent(event, "EventSynchronize");
  if (!e.ok()) return e.status();
  ++counters_.host_waits;
  if ((*e)->stream != nullptr) Drain((*e)->stream, (*e)->at);
  return Usable("EventSynchronize");
}

absl::StatusOr<bool> FakeCudaApi::EventQuery(CudaEvent event) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventQuery"); !s.ok()) return s;
  absl::StatusOr<Event*> e = FindEvent(event, "EventQuery");
  if (!e.ok()) return e.status();
  if ((*e)->stream != nullptr) Drain((*e)->stream, (*e)->at);
  if (absl::Status s = Usable("EventQuery"); !s.ok()) return s;
  return true;
}

absl::Status FakeCudaApi::EventDestroy(CudaEvent event) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable("EventDestroy"); !s.ok()) return s;
  absl::StatusOr<Event*> e = FindEvent(event, "EventDestroy");
  if (!e.ok()) return e.status();
  events_.erase(*e);
  return absl::OkStatus();
}

absl::Status FakeCudaApi::Launch(CudaStream stream, absl::string_view what,
                                 std::function<absl::Status()> work) {
  absl::MutexLock lock(&mu_);
  const std::string call = absl::StrCat("Launch(", what, ")");
  if (absl::Status s = Usable(call); !s.ok()) return s;
  absl::StatusOr<Stream*> s = FindStream(stream, call);
  if (!s.ok()) return s.status();
  Enqueue(*s, std::move(work));
  return absl::OkStatus();
}

absl::StatusOr<void*> FakeCudaApi::HostRange(const void* device_ptr, size_t bytes,
                                             absl::string_view call, absl::string_view role) {
  absl::MutexLock lock(&mu_);
  if (bytes == 0) return nullptr;
  absl::StatusOr<char*> view = DeviceRange(device_ptr, bytes, call, role);
  if (!view.ok()) return view.status();
  return static_cast<void*>(*view);
}

void FakeCudaApi::FailAllocation(int n) {
  absl::MutexLock lock(&mu_);
  fail_countdown_ = n;
}

void FakeCudaApi::InjectStickyError(std::string fault) {
  absl::MutexLock lock(&mu_);
  sticky_fault_ = std::move(fault);
}

absl::StatusOr<int> FakeCudaApi::PendingWork(CudaStream stream) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Stream*> s = FindStream(stream, "PendingWork");
  if (!s.ok()) return s.status();
  return static_cast<int>((*s)->pending.size());
}

}  // namespace lockstep
