#include "engine/kernels/gpu/grid_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/kernels/gpu/block_reduce.h"

namespace lockstep::engine::gpu {

void EmulatorLog::Add(std::string error) {
  if (errors_.size() < kMaxErrors) {
    errors_.push_back(std::move(error));
  } else {
    ++dropped_;
  }
}

std::string EmulatorLog::Summary() const {
  std::string s = absl::StrJoin(errors_, "; ");
  if (dropped_ > 0) absl::StrAppend(&s, "; and ", dropped_, " more");
  return s;
}

// Runs the threads of one block as fibers that switch only at barriers (see the header).
// Owns the fibers' stacks; one thread.
class FiberBlockRunner {
 public:
  using Body = std::function<void(const ThreadIndex&, EmulatedBlock&)>;
  static constexpr size_t kStackBytes = 64 << 10;

  FiberBlockRunner(int threads, const Body* body, std::mt19937_64* rng)
      : body_(body), rng_(rng), fibers_(threads), warp_values_(threads), warp_f64_(threads) {
    for (Fiber& f : fibers_) f.stack = std::make_unique<char[]>(kStackBytes);
  }

  // Every thread of block `block` to its end; FAILED_PRECONDITION when some threads end
  // while others wait at a barrier.
  absl::Status Run(int64_t block, int64_t grid_dim) {
    index_ = ThreadIndex{block, 0, static_cast<int64_t>(fibers_.size()), grid_dim};
    // Shared memory starts as garbage on a GPU: NaN here, so a read before a write shows.
    shared_.assign(kSharedFloats, std::numeric_limits<float>::quiet_NaN());
    shared_f64_.assign(kWarpSize, std::numeric_limits<double>::quiet_NaN());
    for (size_t i = 0; i < fibers_.size(); ++i) {
      Fiber& f = fibers_[i];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack.get();
      f.context.uc_stack.ss_size = kStackBytes;
      f.context.uc_link = &main_;
      makecontext(&f.context, &FiberBlockRunner::Entry, 0);
      f.state = State::kReady;
    }
    std::vector<int> order(fibers_.size());
    for (int barrier = 0;; ++barrier) {
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), *rng_);
      for (int i : order) {
        if (fibers_[i].state != State::kReady) continue;
        running_ = i;
        current_ = this;
        swapcontext(&main_, &fibers_[i].context);
      }
      std::vector<int> done, waiting;
      for (size_t i = 0; i < fibers_.size(); ++i) {
        (fibers_[i].state == State::kDone ? done : waiting).push_back(static_cast<int>(i));
      }
      if (waiting.empty()) return absl::OkStatus();
      if (!done.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "block ", block, ": threads ", Some(done), " returned while threads ", Some(waiting),
            " wait at barrier ", barrier,
            " (every thread of a block must reach every Sync; on a GPU this hangs or is "
            "undefined)"));
      }
      for (Fiber& f : fibers_) f.state = State::kReady;
    }
  }

  void Sync(int thread) {
    fibers_[thread].state = State::kBarrier;
    swapcontext(&fibers_[thread].context, &main_);
  }

  // The xor butterfly of __shfl_xor_sync over the thread's warp, lane l taking
  // op(v[l], v[l ^ offset]) for offsets 16, 8, 4, 2, 1.
  float Warp(int thread, float v, bool max) { return Butterfly(warp_values_, thread, v, max); }
  double WarpF64(int thread, double v) { return Butterfly(warp_f64_, thread, v, /*max=*/false); }

  float* shared() { return shared_.data(); }
  double* shared_f64() { return shared_f64_.data(); }

 private:
  template <typename T>
  T Butterfly(std::vector<T>& values, int thread, T v, bool max) {
    values[thread] = v;
    Sync(thread);
    const int base = thread / kWarpSize * kWarpSize;
    T lanes[kWarpSize], next[kWarpSize];
    std::copy(values.begin() + base, values.begin() + base + kWarpSize, lanes);
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      for (int l = 0; l < kWarpSize; ++l) {
        const T a = lanes[l], b = lanes[l ^ offset];
        next[l] = max ? (a < b ? b : a) : a + b;  // Max (portable.h) for any T
      }
      std::copy(next, next + kWarpSize, lanes);
    }
    Sync(thread);  // nobody overwrites `values` before every lane has read it
    return lanes[thread - base];
  }

  enum class State { kReady, kBarrier, kDone };
  struct Fiber {
    ucontext_t context;
    std::unique_ptr<char[]> stack;
    State state = State::kReady;
  };

  static std::string Some(const std::vector<int>& threads) {
    std::vector<int> head(threads.begin(), threads.begin() + std::min<size_t>(threads.size(), 4));
    return absl::StrCat("{", absl::StrJoin(head, ", "), threads.size() > 4 ? ", ...}" : "}");
  }

  static void Entry() {
    FiberBlockRunner* self = current_;
    const int thread = self->running_;
    ThreadIndex t = self->index_;
    t.thread = thread;
    EmulatedBlock block(self, thread);
    (*self->body_)(t, block);
    self->fibers_[thread].state = State::kDone;
    // Returning resumes main_ (uc_link).
  }

  static thread_local FiberBlockRunner* current_;
  const Body* const body_;
  std::mt19937_64* const rng_;
  std::vector<Fiber> fibers_;
  std::vector<float> warp_values_;
  std::vector<double> warp_f64_;
  std::vector<float> shared_;
  std::vector<double> shared_f64_;
  ucontext_t main_;
  ThreadIndex index_;
  int running_ = 0;
};

thread_local FiberBlockRunner* FiberBlockRunner::current_ = nullptr;

void EmulatedBlock::Sync() { runner_->Sync(thread_); }
float EmulatedBlock::WarpSum(float v) { return runner_->Warp(thread_, v, /*max=*/false); }
float EmulatedBlock::WarpMax(float v) { return runner_->Warp(thread_, v, /*max=*/true); }
double EmulatedBlock::WarpSumF64(double v) { return runner_->WarpF64(thread_, v); }
float* EmulatedBlock::SharedFloats() { return runner_->shared(); }
double* EmulatedBlock::SharedDoubles() { return runner_->shared_f64(); }

absl::Status GridEmulator::CheckShape(LaunchShape shape, bool blocks) const {
  if (shape.blocks < 1 || shape.threads < 1 ||
      (blocks && (shape.threads % kWarpSize != 0 || shape.threads > kWarpSize * kWarpSize))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "emulated kernel ", kernel_, ": launch shape ", shape.blocks, " x ", shape.threads,
        blocks ? " (block kernels need threads a multiple of 32, at most 1024)" : ""));
  }
  return absl::OkStatus();
}

std::vector<int64_t> GridEmulator::Shuffled(int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng_);
  return order;
}

absl::Status GridEmulator::RunThreads(LaunchShape shape,
                                      const std::function<void(const ThreadIndex&)>& body) {
  if (absl::Status s = CheckShape(shape, /*blocks=*/false); !s.ok()) return s;
  for (int64_t b : Shuffled(shape.blocks)) {
    for (int64_t t : Shuffled(shape.threads)) body(ThreadIndex{b, t, shape.threads, shape.blocks});
  }
  return Verdict(shape);
}

absl::Status GridEmulator::RunFibers(
    LaunchShape shape, const std::function<void(const ThreadIndex&, EmulatedBlock&)>& body) {
  if (absl::Status s = CheckShape(shape, /*blocks=*/true); !s.ok()) return s;
  FiberBlockRunner runner(shape.threads, &body, &rng_);
  for (int64_t b : Shuffled(shape.blocks)) {
    if (absl::Status s = runner.Run(b, shape.blocks); !s.ok()) {
      return absl::InternalError(absl::StrCat("emulated kernel ", kernel_, ": ", s.message()));
    }
  }
  return Verdict(shape);
}

absl::Status GridEmulator::Verdict(LaunchShape shape) {
  for (const Output& out : outputs_) {
    std::vector<std::string> wrong;
    int64_t count = 0;
    const std::vector<uint32_t>& w = *out.writes;
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i] == 1) continue;
      if (++count <= 4) wrong.push_back(absl::StrCat("element ", i, " ", w[i], " times"));
    }
    if (count > 0) {
      log_.Add(absl::StrCat(*out.name, ": ", count, " of ", w.size(),
                            " elements not written exactly once (", absl::StrJoin(wrong, ", "),
                            count > 4 ? ", ..." : "", ")"));
    }
  }
  if (log_.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("emulated kernel ", kernel_, " (grid ", shape.blocks,
                                          " x ", shape.threads, "): ", log_.Summary()));
}

}  // namespace lockstep::engine::gpu
