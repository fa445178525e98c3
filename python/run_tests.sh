#!/usr/bin/env bash
# //python:client_test: pytest on python/tests with the package, its generated stubs and the
# cluster's binaries from this test's runfiles. Debian's python3 (/usr/bin/python3: the one
# python3-grpcio, python3-protobuf and python3-pytest are installed for), or $LOCKSTEP_PYTHON.
set -euo pipefail

root="${TEST_SRCDIR:?run me with bazel test //python:client_test}/${TEST_WORKSPACE:-lockstep}"
python="${LOCKSTEP_PYTHON:-/usr/bin/python3}"
if ! "$python" -c "import grpc, google.protobuf, numpy, pytest" 2>/dev/null; then
  echo "client_test: $python lacks grpcio, protobuf, numpy or pytest; run tools/bootstrap.sh" \
       "(Debian's python3-grpcio python3-protobuf python3-numpy python3-pytest)" >&2
  exit 1
fi

export PYTHONPATH="$root/python"
export PYTHONDONTWRITEBYTECODE=1
export LOCKSTEP_BIN="$root/client/lockstep"
export LOCKSTEP_COORDINATOR_BIN="$root/coordinator/lockstep-coordinator"
export LOCKSTEPD_BIN="$root/worker/lockstepd"
export LOCKSTEP_DIGITS_CSV="$root/examples/data/digits.csv.gz"
# The user's own settings must not leak in: the tests name their config files.
unset LOCKSTEP_CONFIG LOCKSTEP_COORDINATOR LOCKSTEP_CA LOCKSTEP_TOKEN LOCKSTEP_INSECURE
export HOME="$TEST_TMPDIR/home"
cd "$root"
exec "$python" -m pytest -p no:cacheprovider -q --durations=5 \
  --basetemp="$TEST_TMPDIR/pytest" "$root/python/tests"
