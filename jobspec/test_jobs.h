// A small job every rule of the lowering accepts, for tests that break one field of it or
// lower it against some cluster: an MLP (input [8], dense 4, sparse categorical
// cross-entropy, SGD at 0.1) on CSV files with a held-out fifth (epochs are knowable),
// global batch 64, 3 epochs. Test-only.
#ifndef LOCKSTEP_JOBSPEC_TEST_JOBS_H_
#define LOCKSTEP_JOBSPEC_TEST_JOBS_H_

#include "lockstep/v1/job_spec.pb.h"

namespace lockstep::jobspec {

v1::JobSpec SmallCsvJob();

}  // namespace lockstep::jobspec

#endif  // LOCKSTEP_JOBSPEC_TEST_JOBS_H_
