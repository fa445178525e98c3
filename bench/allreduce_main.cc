// bench/allreduce: the all-reduce benchmark (also `lockstep bench allreduce`).
#include "collectives/bench/allreduce_bench.h"
#include "common/process.h"

int main(int argc, char** argv) {
  lockstep::InitProcess();
  return lockstep::bench::RunAllreduceBench(argc, argv);
}
