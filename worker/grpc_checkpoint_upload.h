// GrpcUploadOpener: worker/checkpoint_upload.h's UploadStream over the coordinator's
// WorkerService.UploadCheckpoint (a client stream), on lockstepd's channel to the coordinator
// (common/grpc_channel.h, the daemon's certificate: the coordinator checks it holds the task).
// Ownership: each stream owns its call; the opener shares the channel. Thread model: one
// thread per stream.
#ifndef LOCKSTEP_WORKER_GRPC_CHECKPOINT_UPLOAD_H_
#define LOCKSTEP_WORKER_GRPC_CHECKPOINT_UPLOAD_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "worker/checkpoint_upload.h"

namespace lockstep {
namespace worker {

UploadOpener GrpcUploadOpener(std::shared_ptr<grpc::Channel> channel);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_CHECKPOINT_UPLOAD_H_
