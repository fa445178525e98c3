#!/usr/bin/env bash
# The CUDA-built binaries on a machine without the NVIDIA driver: each one asked to use a GPU
# must exit non-zero, saying what is missing (libcuda, the driver, NCCL), within a few
# seconds; never hang, never die of a signal, never claim success. tools/test.sh runs it after
# CI's --config=cuda build (CI machines have no driver); a GPU bundle's folder works too.
#
#   tools/gpu_driverless_check.sh BIN     (BIN: the --config=cuda bazel-bin, or a bundle's
#                                          folder whose bin/ holds the binaries)
#
# Run from the source tree (the CLI's step trains examples/jobs/digits_mlp.json). Each binary
# gets GPU_DRIVERLESS_TIMEOUT_S seconds (default 20). One line per binary, then the verdict.
# Exit status: 0 when every binary behaved, 1 when one did not, 2 for bad arguments, 3 when
# this machine has a driver (libcuda.so.1 loads): then there is nothing to check here.
set -u

if [ "$#" -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: tools/gpu_driverless_check.sh BIN   (the --config=cuda bazel-bin or a GPU bundle's folder)" >&2
  exit 2
fi
bin=$(cd "$1" && pwd)
limit=${GPU_DRIVERLESS_TIMEOUT_S:-20}
if ! [[ "$limit" =~ ^[0-9]+$ ]] || [ "$limit" -lt 1 ]; then
  echo "gpu_driverless_check: GPU_DRIVERLESS_TIMEOUT_S=$limit: want whole seconds >= 1" >&2
  exit 2
fi
cd "$(dirname "$0")/.." || exit 2

# A bundle carries its libraries in lib/ (tools/gpu_bundle.sh).
env_cmd=(env)
[ -d "$bin/lib" ] && env_cmd+=("LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# A machine with the driver cannot show what a driverless one does.
if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  echo "gpu_driverless_check: libcuda.so.1 loads here: a machine with the NVIDIA driver, nothing to check"
  exit 3
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_driverless.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

# check NAME BAZEL_PATH WANT ARGS...: runs the binary (bazel-bin's BAZEL_PATH, or bin/NAME of a
# bundle) with ARGS; it must exit 1..127 within the limit, its output matching the
# extended regular expression WANT (case-insensitive).
check() {
  local name=$1 path=$2 want=$3
  shift 3
  local exe=$bin/$path
  [ -x "$exe" ] || exe=$bin/bin/$name
  if [ ! -x "$exe" ]; then
    echo "FAIL $name: not built (no $bin/$path nor $bin/bin/$name)"
    failures=$((failures + 1))
    return
  fi
  local log=$work/$name.log t0=$SECONDS rc
  timeout -k 5 "$limit" "${env_cmd[@]}" "$exe" "$@" </dev/null >"$log" 2>&1
  rc=$?
  local took=$((SECONDS - t0))
  local said
  said=$(grep -i -E -m 1 "$want" "$log" | cut -c 1-200)
  local verdict=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="hung: killed after $limit s"
  elif [ "$rc" -ge 128 ]; then
    verdict="died of signal $((rc - 128))"
  elif [ "$rc" -eq 0 ]; then
    verdict="exited 0 without a GPU"
  elif [ -z "$said" ]; then
    verdict="exit $rc without naming what is missing (want /$want/): $(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c 1-200)"
  fi
  # `lockstep local` leaves its cluster's folder (its logs) behind: not ours to keep.
  local cluster
  cluster=$(grep -o 'logs in /tmp/lockstep-cluster-[A-Za-z0-9]*' "$log" | head -n 1 | cut -c 9-)
  [ -n "$cluster" ] && rm -rf "$cluster"
  if [ -n "$verdict" ]; then
    echo "FAIL $name $*: $verdict ($took s)"
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc in $took s: $said"
  fi
}

missing='libcuda|driver'
check lockstepd worker/lockstepd "$missing" --coordinator=127.0.0.1:1 --gpus=all
check train_throughput bench/train_throughput "$missing" --device=gpu --workers=1 --runs=1 \
  --steps=1 --warmup=1 --batch=8 --timeout_s=15
# NCCL is missing here too: naming it is as good.
check nccl_allreduce bench/nccl_allreduce "$missing|libnccl" --np=2 --min_bytes=8 --max_bytes=8 \
  --timeout_s=15
# The CLI's own cluster: its worker cannot start, and the CLI says why.
check lockstep client/lockstep "$missing" local --workers=1 --gpus --timeout=15s \
  examples/jobs/digits_mlp.json
# The coordinator touches no GPU: it must start (its --help, no missing library).
exe=$bin/coordinator/lockstep-coordinator
[ -x "$exe" ] || exe=$bin/bin/lockstep-coordinator
out=$(timeout -k 5 "$limit" "${env_cmd[@]}" "$exe" --help 2>&1 </dev/null)
rc=$?
if [ "$rc" -eq 127 ] || [ "$rc" -ge 124 ] || grep -q 'error while loading\|not found (required by' <<<"$out"; then
  echo "FAIL lockstep-coordinator --help: exit $rc: $(head -n 2 <<<"$out" | tr '\n' ' ' | cut -c 1-200)"
  failures=$((failures + 1))
else
  echo "ok   lockstep-coordinator: starts (--help: exit $rc)"
fi

if [ "$failures" -ne 0 ]; then
  echo "gpu_driverless_check: $failures binary(ies) misbehaved without the driver"
  exit 1
fi
echo "gpu_driverless_check: every CUDA-built binary refused cleanly without the driver"
