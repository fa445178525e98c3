#include "bench/peers/gloo_collective.h"

#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace lockstep::bench {

namespace {

absl::Status FromGlooError(int rank, const char* what, const std::exception& e) {
  return absl::UnavailableError(absl::StrCat("gloo rank ", rank, ": ", what, " failed: ", e.what(),
                                             " (a peer rank may have died)"));
}

// Runs `body`, turning Gloo's exceptions into a status.
template <typename Body>
absl::Status Guarded(int rank, const char* what, Body&& body) {
  try {
    body();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return FromGlooError(rank, what, e);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCollective>> GlooCollective::Create(int rank, int np,
                                                                       const std::string& store_dir,
                                                                       Algorithm algorithm,
                                                                       absl::Duration timeout) {
  std::shared_ptr<gloo::rendezvous::Context> context;
  absl::Status status = Guarded(rank, "rendezvous", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    attr.ai_family = AF_INET;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    context = std::make_shared<gloo::rendezvous::Context>(rank, np);
    context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
    context->connectFullMesh(store, device);
  });
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat(status.message(), "; check that all ", np,
                                               " ranks started and share ", store_dir));
  }
  std::unique_ptr<GlooCollective> collective(
      new GlooCollective(rank, np, algorithm, store_dir, timeout, std::move(context)));
  status = Guarded(rank, "setup", [&] {
    GlooCollective& c = *collective;
    c.barrier_ = std::make_unique<gloo::BarrierAllToAll>(c.context_);
    c.broadcast_ = std::make_unique<gloo::BroadcastOneToAll<int>>(
        c.context_, std::vector<int*>{&c.broadcast_value_}, 1, /*rootRank=*/0);
    c.sum_ = std::make_unique<gloo::AllreduceRing<float>>(c.context_,
                                                          std::vector<float*>{&c.sum_value_}, 1);
  });
  if (!status.ok()) return status;
  return collective;
}

GlooCollective::GlooCollective(int rank, int np, Algorithm algorithm, std::string store_dir,
                               absl::Duration timeout, std::shared_ptr<gloo::Context> context)
    : rank_(rank),
      np_(np),
      algorithm_(algorithm),
      store_dir_(std::move(store_dir)),
      timeout_(timeout),
      context_(std::move(context)) {}

GlooCollective::~GlooCollective() = default;

absl::Status GlooCollective::Prepare(float* data, uint64_t count) {
  allreduce_.reset();  // Frees the previous size's buffers first.
  if (count > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo takes at most 2^31-1 elements per all-reduce, asked for ", count));
  }
  return Guarded(rank_, "all-reduce setup", [&] {
    const std::vector<float*> ptrs = {data};
    const int n = static_cast<int>(count);
    if (algorithm_ == Algorithm::kRingChunked) {
      allreduce_ = std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs, n);
    } else {
      allreduce_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs, n);
    }
  });
}

absl::Status GlooCollective::AllReduce() {
  if (allreduce_ == nullptr) {
    return absl::FailedPreconditionError("GlooCollective::AllReduce before Prepare");
  }
  return Guarded(rank_, "all-reduce", [&] { allreduce_->run(); });
}

absl::Status GlooCollective::Barrier() {
  return Guarded(rank_, "barrier", [&] { barrier_->run(); });
}

absl::Status GlooCollective::Leave() {
  return Guarded(rank_, "leaving", [&] {
    gloo::rendezvous::FileStore store(store_dir_);
    store.set(absl::StrCat("lockstep-left-", rank_), {'1'});
    std::vector<std::string> keys;
    for (int r = 0; r < np_; ++r) keys.push_back(absl::StrCat("lockstep-left-", r));
    store.wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
  });
}

absl::StatusOr<int> GlooCollective::BroadcastFromRank0(int value) {
  broadcast_value_ = value;
  absl::Status status = Guarded(rank_, "broadcast", [&] { broadcast_->run(); });
  if (!status.ok()) return status;
  return broadcast_value_;
}

absl::StatusOr<int> GlooCollective::SumOverRanks(int value) {
  sum_value_ = static_cast<float>(value);
  absl::Status status = Guarded(rank_, "sum", [&] { sum_->run(); });
  if (!status.ok()) return status;
  return static_cast<int>(sum_value_);
}

}  // namespace lockstep::bench
