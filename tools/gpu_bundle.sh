#!/usr/bin/env bash
# Bundles the --config=cuda build for a GPU machine that has no Bazel or toolkit: the daemons,
# the CLI and every requires-gpu test binary, with the shared libraries they load that are
# not glibc's (Abseil, gRPC, protobuf, OpenBLAS, libstdc++, ...), in one compressed tarball.
# NCCL, cuBLAS and cuDNN are left out: they are loaded at run time from the GPU machine (for
# example a PyTorch wheel's nvidia/*/lib on LD_LIBRARY_PATH); the CUDA runtime is linked in.
#
#   tools/gpu_bundle.sh [OUT.tar.zst]      (default: dist/lockstep-gpu.tar.zst)
#
# On the GPU machine: tar -xf lockstep-gpu.tar.zst (GNU tar picks the decompressor) && lockstep-gpu/run.sh bin/nccl_gpu_test
# (run.sh puts the bundle's lib/ first on LD_LIBRARY_PATH). Prints the bundle's size and fails
# when it is 60 MiB or more.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-dist/lockstep-gpu.tar.zst}
limit=$((60 * 1024 * 1024))

gpu_tests=$(bazel query 'attr(tags, "requires-gpu", tests(//...))' 2>/dev/null)
binaries=(//worker:lockstepd //coordinator:lockstep-coordinator //client:lockstep)
# shellcheck disable=SC2206
targets=("${binaries[@]}" $gpu_tests)
bazel build --config=cuda "${targets[@]}"
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/lockstep-gpu"
mkdir -p "$root/bin" "$root/lib"
for t in "${targets[@]}"; do
  path="$bin/$(echo "${t#//}" | tr ':' '/')"
  cp "$path" "$root/bin/"
  chmod u+w "$root/bin/$(basename "$path")"
done

# glibc's own libraries and the loader come from the GPU machine; so do the driver and the
# GPU libraries loaded at run time.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libnsl|libcuda|libnccl|libcublas|libcublasLt|libcudnn[a-z_]*)\.so'
for f in "$root"/bin/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$root/lib/$name"
done
strip --strip-debug "$root"/bin/* "$root"/lib/* 2>/dev/null || true

cat >"$root/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a binary of this bundle with its libraries: run.sh bin/lockstepd --gpus=0 ...
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmd=$1
shift
case "$cmd" in /*) ;; *) cmd="$here/$cmd" ;; esac
exec "$cmd" "$@"
RUN
chmod +x "$root/run.sh"

mkdir -p "$(dirname "$out")"
if command -v zstd >/dev/null; then
  tar -C "$stage" -cf - lockstep-gpu | zstd -q -19 -T0 -f -o "$out"
else
  echo "gpu_bundle: no zstd, compressing with xz (the name stays $out)" >&2
  tar -C "$stage" -cf - lockstep-gpu | xz -T0 -6 >"$out"
fi
size=$(stat -c %s "$out")
echo "$out: $(awk -v s="$size" 'BEGIN {printf "%.1f MiB", s / 1048576}') ($(ls "$root/bin" | wc -l) binaries, $(ls "$root/lib" | wc -l) libraries)"
if [ "$size" -ge "$limit" ]; then
  echo "gpu_bundle: $out is over 60 MiB" >&2
  exit 1
fi
