#!/usr/bin/env bash
# Bundles the --config=cuda build for a GPU machine that has no Bazel or toolkit: the daemons,
# the CLI, the binaries tagged gpu-bundle (bench/nccl_allreduce) and every requires-gpu test,
# with the shared libraries they load that are not glibc's (Abseil, gRPC, protobuf, OpenBLAS,
# libstdc++, ...), the torch counterparts of the benches (tools/gpu/) and a manifest of the
# tests, in one compressed tarball for tools/gpu_check.sh.
# NCCL, cuBLAS and cuDNN are left out: they are loaded at run time from the GPU machine (for
# example a PyTorch wheel's nvidia/*/lib on LD_LIBRARY_PATH); the CUDA runtime is linked in.
#
#   tools/gpu_bundle.sh [OUT.tar.xz | OUT.tar.gz]      (default: dist/lockstep-gpu.tar.xz)
#
# The bundle (lockstep-gpu/):
#   bin/        lockstepd, lockstep-coordinator, lockstep, and the gpu-bundle binaries
#   tests/      each requires-gpu test at its package's path (tests/collectives/nccl/...)
#   tests.txt   one line per test: its label and its path in the bundle
#   lib/        the libraries above; run.sh puts them first on LD_LIBRARY_PATH
#   tools/gpu/  torch_allreduce.py, torch_train.py
#   examples/   the digits example jobs and their data (`lockstep local --gpus` trains
#               examples/jobs/digits_mlp.json from the bundle's root)
#   VERSION     the commit it was built from
# xz (or gzip where xz is missing) because the GPU machine may lack zstd; GNU tar or python3's
# tarfile read both. On the GPU machine:
#   tar -xf lockstep-gpu.tar.xz && lockstep-gpu/run.sh tests/collectives/nccl/nccl_gpu_test
# Prints the bundle's size and fails when it is 60 MiB or more.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-dist/lockstep-gpu.tar.xz}
limit=$((60 * 1024 * 1024))
case "$out" in
  *.tar.xz) compress=(xz -T0 -6) ;;
  *.tar.gz) compress=(gzip -9) ;;
  *) echo "gpu_bundle: $out: the name must end in .tar.xz or .tar.gz" >&2; exit 2 ;;
esac
if ! command -v "${compress[0]}" >/dev/null; then
  echo "gpu_bundle: no ${compress[0]} here; name a .tar.gz (gzip) bundle instead" >&2
  exit 2
fi

if ! gpu_tests=$(bazel query 'attr(tags, "requires-gpu", tests(//...))' 2>/dev/null) ||
  ! tools=$(bazel query 'attr(tags, "gpu-bundle", //...)' 2>/dev/null); then
  echo "gpu_bundle: bazel query failed; run it by hand to see why" >&2
  exit 1
fi
# tools/gpu_check.sh compares the bundle with the tree's BUILD files as tools/gpu_tests.py reads
# them: the two must agree, and no CUDA-only test may escape the tag (it would run nowhere).
python3 tools/gpu_tests.py check . || exit 1
if ! diff <(python3 tools/gpu_tests.py list .) <(printf '%s\n' $gpu_tests | LC_ALL=C sort) >&2; then
  echo "gpu_bundle: tools/gpu_tests.py (<) and bazel query (>) disagree on the requires-gpu tests" >&2
  exit 1
fi
# shellcheck disable=SC2206
binaries=(//worker:lockstepd //coordinator:lockstep-coordinator //client:lockstep $tools)
# shellcheck disable=SC2206
tests=($gpu_tests)
bazel build --config=cuda "${binaries[@]}" "${tests[@]}"
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/lockstep-gpu"
mkdir -p "$root/bin" "$root/lib" "$root/tests" "$root/tools/gpu"
path_of() { echo "${1#//}" | tr ':' '/'; }
for t in "${binaries[@]}"; do
  install -m 755 "$bin/$(path_of "$t")" "$root/bin/"
done
: >"$root/tests.txt"
for t in "${tests[@]}"; do
  p=$(path_of "$t")
  install -D -m 755 "$bin/$p" "$root/tests/$p"
  echo "$t tests/$p" >>"$root/tests.txt"
done
cp tools/gpu/*.py "$root/tools/gpu/"
mkdir -p "$root/examples/jobs" "$root/examples/data"
cp examples/jobs/digits_mlp.json examples/jobs/digits_residual.json "$root/examples/jobs/"
cp examples/data/digits.csv.gz "$root/examples/data/"
{
  git rev-parse HEAD 2>/dev/null || echo "not a git checkout"
  git status --porcelain 2>/dev/null | grep -q . && echo "with uncommitted changes"
  date -u '+built %Y-%m-%dT%H:%M:%SZ'
} >"$root/VERSION"

# glibc's own libraries and the loader come from the GPU machine; so do the driver and the
# GPU libraries loaded at run time.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libnsl|libcuda|libnccl|libcublas|libcublasLt|libcudnn[a-z_]*)\.so'
find "$root/bin" "$root/tests" -type f | while read -r f; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$root/lib/$name"
done
find "$root/bin" "$root/tests" "$root/lib" -type f -exec strip --strip-debug {} + 2>/dev/null || true

cat >"$root/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a binary of this bundle with its libraries: run.sh bin/lockstepd ...
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmd=$1
shift
case "$cmd" in /*) ;; *) cmd="$here/$cmd" ;; esac
exec "$cmd" "$@"
RUN
chmod +x "$root/run.sh"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - lockstep-gpu | "${compress[@]}" >"$out"
size=$(stat -c %s "$out")
echo "$out: $(awk -v s="$size" 'BEGIN {printf "%.1f MiB", s / 1048576}') ($(ls "$root/bin" | wc -l) binaries, ${#tests[@]} tests, $(ls "$root/lib" | wc -l) libraries)"
if [ "$size" -ge "$limit" ]; then
  echo "gpu_bundle: $out is over 60 MiB" >&2
  exit 1
fi
