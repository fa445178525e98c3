// `lockstep export CHECKPOINT --format=FORMAT --output=PATH`: a checkpoint's variables (and,
// with --with_optimizer_state, its optimizer slots) written in a format the ecosystem reads
// (export/builtin_formats.h lists them: safetensors, npz, onnx). CHECKPOINT is a .lsckpt file
// or a checkpoint directory (its newest checkpoint that reads back whole). --spec=JOB.json
// gives the job spec: ONNX needs its model, and the export's metadata keeps it.
//
// A job id is refused with a message saying what to do instead: the coordinator offers no
// RPC that fetches a job's checkpoint yet.
#ifndef LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command ExportCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_
