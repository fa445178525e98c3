// StreamWriter: a server-streaming gRPC reactor fed by a blocking "next message" function.
// A thread of its own calls `next(deadline)` in a loop: a message is written (and the
// writer waits for the write to complete before asking for the next), DEADLINE_EXCEEDED
// means "nothing yet" (the loop checks whether the client went away and asks again), any
// other error ends the stream with that status; after a message for which `last` holds,
// the stream ends OK. Used by WatchAssignments and WatchJob (grpc_service.cc).
//
// Ownership: deletes itself in OnDone() (gRPC's rule for callback reactors). `on_exit`
// runs on its thread after Finish(), touching no member (the service uses it to count
// live streams for Shutdown). Thread model: one writer thread; gRPC's callbacks only set
// flags under the mutex.
#ifndef LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_
#define LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"

namespace lockstep {
namespace coordinator {

template <typename T>
class StreamWriter final : public grpc::ServerWriteReactor<T> {
 public:
  using Next = std::function<absl::StatusOr<T>(absl::Time deadline)>;
  using IsLast = std::function<bool(const T&)>;

  // Starts the writer thread. `poll` bounds how long a client that went away keeps it.
  static StreamWriter* Start(Next next, IsLast last, std::function<void()> on_exit,
                             absl::Duration poll = absl::Milliseconds(200)) {
    auto* w = new StreamWriter(std::move(next), std::move(last), std::move(on_exit), poll);
    std::thread([w] { w->Run(); }).detach();
    return w;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    write_done_ = true;
    write_ok_ = ok;
  }
  void OnCancel() override {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
  }
  void OnDone() override { delete this; }

 private:
  StreamWriter(Next next, IsLast last, std::function<void()> on_exit, absl::Duration poll)
      : next_(std::move(next)), last_(std::move(last)), on_exit_(std::move(on_exit)), poll_(poll) {}

  void Run() {
    grpc::Status status = grpc::Status::OK;
    while (true) {
      {
        absl::MutexLock l(&mu_);
        if (cancelled_) {
          status = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
          break;
        }
      }
      absl::StatusOr<T> message = next_(absl::Now() + poll_);
      if (!message.ok()) {
        if (message.status().code() == absl::StatusCode::kDeadlineExceeded) continue;
        status = ToGrpcStatus(message.status());
        break;
      }
      message_ = std::move(*message);
      bool ok;
      {
        absl::MutexLock l(&mu_);
        write_done_ = false;
        this->StartWrite(&message_);
        mu_.Await(absl::Condition(&write_done_));
        ok = write_ok_;
      }
      if (!ok || last_(message_)) break;
    }
    std::function<void()> on_exit = std::move(on_exit_);
    this->Finish(status);  // may delete this
    on_exit();
  }

  Next next_;
  IsLast last_;
  std::function<void()> on_exit_;
  const absl::Duration poll_;
  T message_;
  absl::Mutex mu_;
  bool write_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_
