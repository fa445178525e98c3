// bench/allreduce: the all-reduce benchmark (also `lockstep bench allreduce`).
#include "bench/allreduce_bench.h"

int main(int argc, char** argv) { return lockstep::bench::RunAllreduceBench(argc, argv); }
