// GridEmulator: runs a kernel body written once (portable.h) on the CPU as a GPU would, and
// checks what a GPU would not tell: every (block, thread) of the launch shape runs, blocks
// (and threads within a block) in a shuffled order drawn from a seed, every memory access goes
// through an accessor that checks its bounds, and every output element is written exactly
// once (a kernel that skips an element or writes one twice, e.g. a wrong grid-stride loop, is
// an error, not a silent wrong answer). Errors are returned as INTERNAL naming the kernel, the
// buffer and the first elements at fault.
//
// Block kernels (block_reduce.h) run their block's threads as fibers (ucontext) that switch
// only at Sync(): each thread keeps its locals across a barrier exactly as on a GPU, so the
// kernel is the same code the GPU runs. The alternatives are worse: kernels written as phase
// lambdas would not be the GPU's code, and an OS thread per GPU thread (256 per block) would
// be slow and its interleavings not reproducible. A barrier that some threads of the block
// never reach (a hang or undefined behaviour on a GPU) is reported. Warp operations compute
// the same xor butterfly as __shfl_xor_sync, so reductions give the GPU's bits; in the
// emulator they synchronise the whole block, so every thread of the block must call them
// (stricter than a GPU, which only needs the warp).
//
// Ownership: the emulator owns its write counters and log; accessors it hands out point into
// them and into the caller's memory and live as long as the emulator. Thread model: one thread.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_GRID_EMULATOR_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_GRID_EMULATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

// What went wrong in one launch (bounded: the first kMaxErrors).
class EmulatorLog {
 public:
  static constexpr int kMaxErrors = 8;
  void Add(std::string error);
  bool empty() const { return errors_.empty(); }
  // "<first errors>; and N more".
  std::string Summary() const;

 private:
  std::vector<std::string> errors_;
  int64_t dropped_ = 0;
};

// The Access policy of kernels in emulation: bounds-checked loads, counted stores.
struct EmulatedAccess {
  template <typename T>
  struct In {
    const T* p = nullptr;
    int64_t n = 0;
    const std::string* name = nullptr;
    EmulatorLog* log = nullptr;
    T Load(int64_t i) const {
      if (i < 0 || i >= n) {
        log->Add(*name + ": load of element " + std::to_string(i) + " of " + std::to_string(n));
        return T(0);
      }
      return p[i];
    }
  };
  template <typename T>
  struct Out {
    T* p = nullptr;
    int64_t n = 0;
    const std::string* name = nullptr;
    EmulatorLog* log = nullptr;
    uint32_t* writes = nullptr;
    T Load(int64_t i) const {
      if (i < 0 || i >= n) {
        log->Add(*name + ": load of element " + std::to_string(i) + " of " + std::to_string(n));
        return T(0);
      }
      return p[i];
    }
    void Store(int64_t i, T v) const {
      if (i < 0 || i >= n) {
        log->Add(*name + ": store to element " + std::to_string(i) + " of " + std::to_string(n));
        return;
      }
      ++writes[i];
      p[i] = v;
    }
  };
};

class EmulatedBlock;

class GridEmulator {
 public:
  // `kernel` names the launch in errors.
  GridEmulator(std::string kernel, uint64_t seed) : kernel_(std::move(kernel)), rng_(seed) {}

  template <typename T>
  EmulatedAccess::In<T> In(const void* p, int64_t n, absl::string_view name) {
    names_.emplace_back(name);
    return EmulatedAccess::In<T>{static_cast<const T*>(p), n, &names_.back(), &log_};
  }
  // An output: after the run, each of its n elements must have been stored exactly once.
  template <typename T>
  EmulatedAccess::Out<T> Out(void* p, int64_t n, absl::string_view name) {
    names_.emplace_back(name);
    writes_.emplace_back(static_cast<size_t>(n), 0u);
    outputs_.push_back(Output{&names_.back(), &writes_.back()});
    return EmulatedAccess::Out<T>{static_cast<T*>(p), n, &names_.back(), &log_,
                                  writes_.back().data()};
  }

  // An element-wise kernel: kernel(ThreadIndex) for every thread of `shape`.
  template <class K>
  absl::Status Run(LaunchShape shape, const K& kernel) {
    return RunThreads(shape, [&kernel](const ThreadIndex& t) { kernel(t); });
  }
  // A block kernel: kernel(ThreadIndex, block) with the block API, threads as fibers.
  template <class K>
  absl::Status RunBlocks(LaunchShape shape, const K& kernel) {
    return RunFibers(shape,
                     [&kernel](const ThreadIndex& t, EmulatedBlock& block) { kernel(t, block); });
  }

 private:
  struct Output {
    const std::string* name;
    std::vector<uint32_t>* writes;
  };
  absl::Status RunThreads(LaunchShape shape, const std::function<void(const ThreadIndex&)>& body);
  absl::Status RunFibers(LaunchShape shape,
                         const std::function<void(const ThreadIndex&, EmulatedBlock&)>& body);
  absl::Status CheckShape(LaunchShape shape, bool blocks) const;
  std::vector<int64_t> Shuffled(int64_t n);
  // The log, and every output written exactly once.
  absl::Status Verdict(LaunchShape shape);

  const std::string kernel_;
  std::mt19937_64 rng_;
  EmulatorLog log_;
  std::deque<std::string> names_;
  std::deque<std::vector<uint32_t>> writes_;
  std::vector<Output> outputs_;
};

class FiberBlockRunner;

// The block API (block_reduce.h) as one emulated thread sees it.
class EmulatedBlock {
 public:
  EmulatedBlock(FiberBlockRunner* runner, int thread) : runner_(runner), thread_(thread) {}
  void Sync();
  float WarpSum(float v);
  float WarpMax(float v);
  double WarpSumF64(double v);
  float* SharedFloats();
  double* SharedDoubles();

 private:
  FiberBlockRunner* const runner_;
  const int thread_;
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_GRID_EMULATOR_H_
