#!/usr/bin/env bash
# Builds deploy/docker/Dockerfile without a container daemon (buildah: vfs storage, chroot
# isolation, as root), then runs `lockstep local --workers=2` inside the runtime image as
# its unprivileged user. Needs buildah (and debootstrap where no registry is reachable: the
# Debian 12 base images are then made here from Debian's packages, fetched from the mirror
# this machine's apt uses: tools/apt_mirror.sh, or LOCKSTEP_APT_MIRROR and
# LOCKSTEP_APT_SECURITY_MIRROR).
#   deploy/docker/build.sh                 # lockstep:latest, then the smoke run
#   deploy/docker/build.sh --no-run        # build only
# Bazel's disk cache (~/.cache/lockstep-bazel-disk, .bazelrc) is lent to the build stage, so
# a second image build reuses the first one's objects (the host's own builds do not match:
# their actions see another PATH). A cold build takes about 25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

run=1
[ "${1:-}" = "--no-run" ] && run=0
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
image=${LOCKSTEP_IMAGE:-localhost/lockstep:latest}

# debian:12 and debian:12-slim: pulled when a registry answers, else debootstrapped.
base=docker.io/library/debian:12
if ! buildah inspect --type image "$base" >/dev/null 2>&1 &&
   ! buildah pull --quiet "$base" >/dev/null 2>&1; then
  echo "build.sh: no registry: making $base with debootstrap" >&2
  # The Debian mirrors this machine's apt uses (or LOCKSTEP_APT_MIRROR and
  # LOCKSTEP_APT_SECURITY_MIRROR): the image's apt then fetches where this machine does.
  mirror=$(tools/apt_mirror.sh bookworm)
  security=$(tools/apt_mirror.sh --security bookworm)
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  rm -f "$rootfs/etc/apt/sources.list"
  # The archive and its security suite; the Dockerfile's CUDA stages add contrib and non-free
  # to both Components lines.
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$rootfs/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$base" >/dev/null
fi
buildah inspect --type image docker.io/library/debian:12-slim >/dev/null 2>&1 ||
  buildah pull --quiet docker.io/library/debian:12-slim >/dev/null 2>&1 ||
  buildah tag "$base" docker.io/library/debian:12-slim

cache="$HOME/.cache/lockstep-bazel-disk"
mkdir -p "$cache"
buildah bud --pull=never --layers=false --target runtime --tag "$image" \
  --build-arg LOCKSTEP_DEPLOY_TOOLS=0 --build-arg BAZEL_FLAGS= \
  --volume "$cache:/root/.cache/lockstep-bazel-disk" \
  -f deploy/docker/Dockerfile .
echo "build.sh: built $image" >&2
[ "$run" -eq 1 ] || exit 0

# The smoke run: a coordinator and two workers train the bundled digits MLP in the image.
ctr=$(buildah from --pull=never "$image")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah run --user 10001:10001 "$ctr" -- id
buildah run --user 10001:10001 "$ctr" -- lockstep local --workers=2
echo "build.sh: lockstep local ran in $image" >&2
