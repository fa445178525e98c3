#!/usr/bin/env bash
# The README's main command: a whole Lockstep cluster on this machine.
# Installs what the build needs, builds the three binaries, then runs
# `lockstep local` (a coordinator and N workers on loopback). Arguments go to
# `lockstep local`; default: --workers 3. Example: tools/local.sh --workers 4 --keep_running
set -euo pipefail
cd "$(dirname "$0")/.."

tools/bootstrap.sh
bazel build //client:lockstep //coordinator:lockstep-coordinator //worker:lockstepd

[ "$#" -eq 0 ] && set -- --workers 3
exec bazel-bin/client/lockstep local "$@"
