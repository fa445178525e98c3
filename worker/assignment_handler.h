// AssignmentHandler: what the Agent hands the assignments it receives over WatchAssignments
// to, and asks for the job reports it sends in every heartbeat. JobRunner is the real one;
// tests use fakes, so the agent's state machine is tested without training anything.
// Thread model: implementations are thread-safe (the agent's watch thread calls Handle(),
// its main thread Reports() and DropAll()).
#ifndef LOCKSTEP_WORKER_ASSIGNMENT_HANDLER_H_
#define LOCKSTEP_WORKER_ASSIGNMENT_HANDLER_H_

#include <string>
#include <vector>

#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace worker {

class AssignmentHandler {
 public:
  virtual ~AssignmentHandler() = default;
  // A partition to run or an abort; returns at once (jobs run on their own threads).
  virtual void Handle(const v1::Assignment& assignment) = 0;
  // Aborts every job (this worker was declared LOST or replaced, or is stopping).
  virtual void DropAll(const std::string& reason) = 0;
  // One report per job attempt running or recently ended (each final report is repeated
  // in a few heartbeats that reached the coordinator, so a lost heartbeat, or a coordinator
  // down for a while, does not lose it).
  virtual std::vector<v1::JobReport> Reports() = 0;
  // The reports of the last Reports() call reached the coordinator (its heartbeat
  // succeeded).
  virtual void ReportsDelivered() {}
  // The flight records and new log lines of the jobs (DESIGN.md, "When a job hangs"), for
  // the same heartbeat as Reports(); ReportsDelivered() also covers them.
  virtual std::vector<v1::JobDiagnostics> Diagnostics() { return {}; }
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_ASSIGNMENT_HANDLER_H_
