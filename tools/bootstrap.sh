#!/usr/bin/env bash
# Installs every Debian package that Lockstep's build, tests and benchmarks need.
# Idempotent: when everything is already installed it only checks and returns (< 1 s).
# Works as root with no standard input; uses sudo when not root.
set -euo pipefail

PACKAGES=(
  # Build system: Debian's Bazel 4.2 and the rule sets it needs offline.
  bazel-bootstrap bazel-platforms bazel-skylib
  # Toolchain and formatting.
  g++ clang-format
  # Control plane: gRPC, protobuf (protoc + grpc_cpp_plugin), Abseil.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  # Common libraries.
  nlohmann-json3-dev libspdlog-dev libfmt-dev libsqlite3-dev libssl-dev
  # Compute: CBLAS sgemm/dgemm.
  libopenblas-dev
  # Tests.
  libgtest-dev libgmock-dev
  # Benchmark peers, run side by side with our collectives.
  libgloo-dev libopenmpi-dev openmpi-bin
  # Used by scripts and multi-process tests.
  procps python3
  # tests/export_test.sh reads `lockstep export`'s npz with NumPy's np.load (and its
  # safetensors with NumPy arrays), independently of Lockstep's own writers, and checks its
  # ONNX models with onnx.checker (python3-onnx).
  python3-numpy python3-onnx
  # The multi-host test tier (tests/netns): `ip netns`, veth, bridge, `tc` (iproute2) and
  # packet filters for partitions and loss (nftables).
  iproute2 nftables
  # The Python client (python/): its runtime and its pytest suite (//python:client_test); it
  # reads weights into NumPy arrays (python3-numpy, above). Its stubs come from protoc and
  # grpc_python_plugin (protobuf-compiler-grpc, above).
  python3-grpcio python3-protobuf python3-pytest
  # Monitoring: metrics (prometheus-cpp) and the Prometheus server its end-to-end test scrapes.
  prometheus-cpp-dev prometheus
)
# The deploy checks (deploy/BUILD.bazel): `systemd-analyze verify` and `security` on the
# units, YAML for the manifests, `kubectl kustomize` (Debian's kubernetes-client where no
# kubectl is installed), Node.js for the schema validators. LOCKSTEP_DEPLOY_TOOLS=0 (the
# image's build stage) leaves them out.
if [ "${LOCKSTEP_DEPLOY_TOOLS:-1}" = 1 ]; then
  PACKAGES+=(systemd python3-yaml)
  command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
  command -v npm >/dev/null || PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -ne 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "bootstrap: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
  echo "bootstrap: done" >&2
fi

# The manifests' schema validators (deploy/k8s/validate), at the versions its lock file pins,
# into ~/.cache/lockstep-k8s-validate (outside the tree; reinstalled when the lock changes).
# They come from the registry npm is configured with on this machine (`npm config get
# registry`): the lock pins versions and integrity hashes but records no `resolved` URLs
# (tools/no_mirror_hosts_test.sh keeps it so), so no registry's host is written here.
if [ "${LOCKSTEP_DEPLOY_TOOLS:-1}" = 1 ]; then
  src="$(cd "$(dirname "$0")/.." && pwd)/deploy/k8s/validate"
  dst="$HOME/.cache/lockstep-k8s-validate"
  if [ ! -d "$dst/node_modules/kubernetes-models" ] ||
     ! cmp -s "$src/package-lock.json" "$dst/package-lock.json"; then
    registry=$(npm config get registry 2>/dev/null || true)
    echo "bootstrap: npm ci in $dst from ${registry:-npm's default registry}" >&2
    mkdir -p "$dst"
    cp "$src/package.json" "$src/package-lock.json" "$dst/"
    (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error </dev/null >/dev/null) ||
      echo "bootstrap: npm ci failed in $dst from ${registry:-npm's default registry} (set" \
        "another with npm config set registry URL); //deploy:k8s_test will say so" >&2
  fi
fi
