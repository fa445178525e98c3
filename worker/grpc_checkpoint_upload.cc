#include "worker/grpc_checkpoint_upload.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace worker {
namespace {

class GrpcUploadStream final : public UploadStream {
 public:
  GrpcUploadStream(v1::WorkerService::Stub* stub, absl::Time deadline) {
    ctx_.set_deadline(absl::ToChronoTime(deadline));
    writer_ = stub->UploadCheckpoint(&ctx_, &response_);
  }
  bool Write(const v1::CheckpointUploadChunk& message) override { return writer_->Write(message); }
  absl::Status Finish() override {
    writer_->WritesDone();
    return FromGrpcStatus(writer_->Finish(), "UploadCheckpoint to the coordinator");
  }

 private:
  grpc::ClientContext ctx_;
  v1::UploadCheckpointResponse response_;
  std::unique_ptr<grpc::ClientWriter<v1::CheckpointUploadChunk>> writer_;
};

}  // namespace

UploadOpener GrpcUploadOpener(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::WorkerService::Stub> stub = v1::WorkerService::NewStub(std::move(channel));
  return [stub](absl::Time deadline) -> std::unique_ptr<UploadStream> {
    return std::make_unique<GrpcUploadStream>(stub.get(), deadline);
  };
}

}  // namespace worker
}  // namespace lockstep
