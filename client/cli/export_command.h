// `lockstep export CHECKPOINT|JOB --format=FORMAT --output=PATH`: a checkpoint's variables
// (and, with --with_optimizer_state, its optimizer slots) written in a format the ecosystem
// reads (export/builtin_formats.h lists them: safetensors, npz, onnx).
//
// The argument is a CHECKPOINT when such a path exists (a .lsckpt file, or a checkpoint
// directory: its newest checkpoint that reads back whole), else a JOB id; the command says on
// stderr which it took. A JOB's newest checkpoint (or --step's) is fetched through the
// coordinator with the client's credentials (a viewer suffices: JobService.FetchCheckpoint,
// coordinator/checkpoint_fetch.h) into "<output>.lsckpt.part", with its progress on stderr,
// read back whole, exported, and the part file deleted; the job's own spec (from describe)
// gives ONNX its model and the export its metadata. --spec=JOB.json gives the spec of a
// CHECKPOINT (ONNX needs its model), or replaces a JOB's.
#ifndef LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command ExportCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_EXPORT_COMMAND_H_
