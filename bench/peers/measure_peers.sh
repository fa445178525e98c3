#!/usr/bin/env bash
# Measures every peer (Open MPI vader and tcp, Gloo ring_chunked and halving_doubling)
# REPEATS times at each world size, one JSON line per size per run, into OUT_DIR:
#   bench/peers/measure_peers.sh OUT_DIR [REPEATS=3] [SIZES=8:64M] [NPS="2 4"]
# Build first: bazel build //bench/peers:all. Summarise with peer_table.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: measure_peers.sh OUT_DIR [REPEATS] [SIZES] [NPS]}
repeats=${2:-3}
sizes=${3:-8:64M}
nps=${4:-2 4}
bin=bazel-bin/bench/peers
mkdir -p "$out"
for run in $(seq 1 "$repeats"); do
  for np in $nps; do
    for algorithm in ring_chunked halving_doubling; do
      "$bin/gloo_allreduce" --np "$np" --sizes "$sizes" --algorithm "$algorithm" \
        >>"$out/np$np.jsonl"
    done
    for btl in vader tcp; do
      "$bin/mpi_allreduce" --np "$np" --sizes "$sizes" --btl "$btl" >>"$out/np$np.jsonl"
    done
    echo "run $run np $np done ($(uptime))" >&2
  done
done
