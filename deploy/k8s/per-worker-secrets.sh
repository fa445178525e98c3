#!/usr/bin/env bash
# Issues one certificate per worker and stores each in its own Secret, for
# overlays/per-worker-secrets (clusters without cert-manager):
#   lockstep-worker-<i>-0-tls   ca.crt, tls.crt, tls.key of pod lockstep-worker-<i>-0 (CN =
#                               the pod name, OU = daemon: the identity the coordinator
#                               binds worker/<i> to)
# Each Secret is named in one worker's pod template only, so only the node running that pod
# is ever sent its key.
#
#   per-worker-secrets.sh [--dir=DIR] [--namespace=NS] [--dry-run] WORKERS
# --dir: a `lockstep certs init` directory (default tls; its ca.key stays there, off the
# cluster); --namespace: default lockstep; --dry-run: print the kubectl commands instead of
# running them. A worker whose certificate exists in DIR is not issued again; its Secret is
# replaced (`kubectl apply`), so rerunning after adding workers is safe.
set -euo pipefail

dir=tls namespace=lockstep dry_run=0 workers=
for arg in "$@"; do
  case "$arg" in
    --dir=*) dir=${arg#--dir=} ;;
    --namespace=*) namespace=${arg#--namespace=} ;;
    --dry-run) dry_run=1 ;;
    -*) sed -n '10,14p' "$0" >&2; exit 2 ;;
    *) workers=$arg ;;
  esac
done
case "$workers" in
  '' | *[!0-9]*) echo "per-worker-secrets.sh: WORKERS must be a number of workers" >&2; exit 2 ;;
esac
if [ ! -r "$dir/ca.crt" ] || [ ! -r "$dir/ca.key" ]; then
  echo "per-worker-secrets.sh: no CA in $dir: run \`lockstep certs init --dir=$dir\` first" >&2
  exit 1
fi

run() {
  if [ "$dry_run" = 1 ]; then printf '%s\n' "$*"; else "$@"; fi
}

for ((i = 0; i < workers; i++)); do
  pod="lockstep-worker-$i-0"
  if [ ! -r "$dir/$pod.crt" ] || [ ! -r "$dir/$pod.key" ]; then
    run lockstep certs issue --dir="$dir" --name="$pod" --san="$pod.lockstep-worker.$namespace.svc"
  fi
  secret="$pod-tls"
  if [ "$dry_run" = 1 ]; then
    printf 'kubectl -n %s create secret generic %s --from-file=ca.crt=%s --from-file=tls.crt=%s --from-file=tls.key=%s --dry-run=client -o yaml | kubectl apply -f -\n' \
      "$namespace" "$secret" "$dir/ca.crt" "$dir/$pod.crt" "$dir/$pod.key"
  else
    kubectl -n "$namespace" create secret generic "$secret" --from-file=ca.crt="$dir/ca.crt" \
      --from-file=tls.crt="$dir/$pod.crt" --from-file=tls.key="$dir/$pod.key" \
      --dry-run=client -o yaml | kubectl apply -f -
  fi
done
