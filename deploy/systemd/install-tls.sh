#!/usr/bin/env bash
# Installs Lockstep's TLS material and tokens for the systemd units, each daemon's in a
# directory that only its own group can enter, so that a worker cannot read the operators'
# tokens or the coordinator's key, and the coordinator no worker's key:
#   /etc/lockstep/ca.crt                      root:root                  0644 (public)
#   /etc/lockstep/coordinator/                root:lockstep-coordinator  0750
#     tls.crt 0644, tls.key 0640, tokens 0640 (lockstep-coordinator.service)
#   /etc/lockstep/worker/                     root:lockstep-worker       0750
#     <instance>.crt 0644, <instance>.key 0640 (lockstepd@<instance>.service)
# The groups come from lockstep.sysusers.conf; only lockstep-coordinator.service is in
# lockstep-coordinator and only the lockstepd@ instances in lockstep-worker. The daemons
# accept these root-owned, group-readable files and refuse any that every user can read.
# The CA's key is never installed: keep it off the hosts.
#
#   install-tls.sh --certs=DIR [--root=DIR] [--coordinator=NAME --tokens=FILE]
#                  [--worker=INSTANCE:NAME]...
# --certs: a `lockstep certs` directory (ca.crt, NAME.crt, NAME.key); --coordinator: the
# certificate to install as the coordinator's; --tokens: its tokens file (`<token> <role>
# <name>` lines); --worker: the certificate NAME for instance INSTANCE (lockstepd@INSTANCE);
# --root: install under DIR instead of / (an image, a test). Run as root. The groups may be
# given by name or number in LOCKSTEP_COORDINATOR_GROUP and LOCKSTEP_WORKER_GROUP.
# Example, on a worker host with two instances:
#   lockstep certs issue --dir=tls --name=host1-0 && lockstep certs issue --dir=tls --name=host1-1
#   sudo deploy/systemd/install-tls.sh --certs=tls --worker=0:host1-0 --worker=1:host1-1
set -euo pipefail

usage() {
  sed -n '15,21p' "$0" >&2
  exit 2
}

root="" certs="" coordinator="" tokens=""
workers=()
for arg in "$@"; do
  case "$arg" in
    --root=*) root=${arg#*=} ;;
    --certs=*) certs=${arg#*=} ;;
    --coordinator=*) coordinator=${arg#*=} ;;
    --tokens=*) tokens=${arg#*=} ;;
    --worker=*) workers+=("${arg#*=}") ;;
    *) echo "install-tls.sh: unknown argument '$arg'" >&2 && usage ;;
  esac
done
[ -n "$certs" ] || usage
[ -r "$certs/ca.crt" ] || { echo "install-tls.sh: --certs: no ca.crt in $certs" >&2; exit 2; }
if [ -n "$coordinator" ] && [ -z "$tokens" ]; then
  echo "install-tls.sh: --coordinator needs --tokens (the clients' tokens file)" >&2
  exit 2
fi
coordinator_group=${LOCKSTEP_COORDINATOR_GROUP:-lockstep-coordinator}
worker_group=${LOCKSTEP_WORKER_GROUP:-lockstep-worker}

# A certificate and its key from --certs; a clear error when either is missing.
pair() {
  local name=$1
  for f in "$certs/$name.crt" "$certs/$name.key"; do
    [ -r "$f" ] || { echo "install-tls.sh: no $f (lockstep certs issue --dir=$certs --name=$name)" >&2; exit 2; }
  done
}

etc=$root/etc/lockstep
install -d -m 0755 -o root -g root "$etc"
install -m 0644 -o root -g root "$certs/ca.crt" "$etc/ca.crt"

if [ -n "$coordinator" ]; then
  pair "$coordinator"
  [ -r "$tokens" ] || { echo "install-tls.sh: --tokens: cannot read $tokens" >&2; exit 2; }
  install -d -m 0750 -o root -g "$coordinator_group" "$etc/coordinator"
  install -m 0644 -o root -g root "$certs/$coordinator.crt" "$etc/coordinator/tls.crt"
  install -m 0640 -o root -g "$coordinator_group" "$certs/$coordinator.key" "$etc/coordinator/tls.key"
  install -m 0640 -o root -g "$coordinator_group" "$tokens" "$etc/coordinator/tokens"
fi

for w in "${workers[@]}"; do
  instance=${w%%:*} name=${w#*:}
  if [ "$instance" = "$w" ] || ! [[ "$instance" =~ ^[A-Za-z0-9_.-]+$ ]]; then
    echo "install-tls.sh: --worker=$w: expected INSTANCE:NAME (e.g. 0:host1-0)" >&2
    exit 2
  fi
  pair "$name"
  install -d -m 0750 -o root -g "$worker_group" "$etc/worker"
  install -m 0644 -o root -g root "$certs/$name.crt" "$etc/worker/$instance.crt"
  install -m 0640 -o root -g "$worker_group" "$certs/$name.key" "$etc/worker/$instance.key"
done
