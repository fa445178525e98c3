#!/usr/bin/env bash
# Runs the hardened units under a real systemd: boots the image from deploy/docker/build.sh
# (plus Debian's systemd) with systemd-nspawn, starts lockstep-coordinator.service and
# lockstepd@0/@1 (one CPU each, --transport=shm: the two instances share /dev/shm as one
# dynamic user), trains the digits job on them over mutual TLS, prints what each unit runs
# as, that neither daemon can read the other's secrets, and its exposure as the booted
# systemd rates it, then powers off. Needs root, buildah,
# systemd-nspawn (Debian's systemd-container) and the image (deploy/docker/build.sh --no-run).
#   deploy/systemd/smoke.sh   # exit 0: "smoke: job exit 0", two "reads its", three "cannot read"
set -euo pipefail
cd "$(dirname "$0")/../.."
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
image=${LOCKSTEP_IMAGE:-localhost/lockstep:latest}

ctr=$(buildah from --pull=never "$image")
work=$(mktemp -d)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
buildah run --user 0:0 "$ctr" -- sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends systemd dbus >/dev/null"
root=$(buildah mount "$ctr")
# Certificate names are lowercase (`lockstep certs` refuses capitals); a host name may not be.
host=$(cat "$root/etc/hostname" 2>/dev/null || hostname)
host=$(echo "$host" | tr '[:upper:]' '[:lower:]')

# The units as README "Deploying" installs them, and their groups: lockstep-coordinator and
# lockstep-worker (lockstep.sysusers.conf), made in the image by systemd-sysusers.
cp deploy/systemd/lockstep-coordinator.service deploy/systemd/lockstepd@.service \
  "$root/etc/systemd/system/"
install -D -m 0644 deploy/systemd/lockstep.sysusers.conf "$root/usr/lib/sysusers.d/lockstep.conf"
install -D -m 0755 deploy/systemd/install-tls.sh "$root/usr/local/sbin/lockstep-install-tls"
buildah run --user 0:0 "$ctr" -- systemd-sysusers

# TLS: a CA, the coordinator's certificate and one per worker instance, made in a scratch
# directory and laid out by install-tls.sh: each daemon's in a directory only its group
# enters. The CA's key stays out of /etc/lockstep.
lockstep() { buildah run --user 0:0 "$ctr" -- lockstep "$@" >/dev/null; }
lockstep certs init --dir=/root/tls
lockstep certs issue --dir=/root/tls --name="$host" --san=localhost,127.0.0.1
for i in 0 1; do lockstep certs issue --dir=/root/tls --name="$host-$i"; done
token=$(buildah run "$ctr" -- lockstep certs token)
(umask 077 && echo "$token operator smoke" >"$root/root/tokens")
# The client's token in a config file, not on a command line.
(umask 077 && printf 'coordinator: 127.0.0.1:7000\nca: /etc/lockstep/ca.crt\ntoken: %s\n' \
  "$token" >"$root/root/smoke.config")
buildah run --user 0:0 "$ctr" -- lockstep-install-tls --certs=/root/tls \
  --coordinator="$host" --tokens=/root/tokens --worker=0:"$host-0" --worker=1:"$host-1"
rm -rf "$root/root/tls" "$root/root/tokens"

echo "LOCKSTEP_COORDINATOR=127.0.0.1:7000" >"$root/etc/default/lockstepd"
for i in 0 1; do
  echo "LOCKSTEPD_ARGS=--transport=shm --cpu_affinity=$i" >"$root/etc/default/lockstepd-$i"
done
sed 's|"examples/data/|"/opt/lockstep/examples/data/|' examples/jobs/digits_mlp.json \
  >"$root/opt/lockstep/smoke.json"

cat >"$root/smoke.sh" <<EOF
#!/bin/sh
C="--config=/root/smoke.config"
for i in \$(seq 60); do lockstep status \$C 2>/dev/null | grep -q "2 ALIVE" && break; sleep 1; done
lockstep status \$C
lockstep submit /opt/lockstep/smoke.json --watch \$C
echo "smoke: job exit \$?"
for u in lockstepd@0 lockstepd@1; do
  p=\$(systemctl show -p MainPID --value \$u.service)
  echo "smoke: \$u" \$(grep -E "^(Uid|Groups|Cpus_allowed_list)" /proc/\$p/status)
done
# Each daemon's user and groups, tried on the other's secrets: none may be read.
as() {
  p=\$(systemctl show -p MainPID --value \$1.service)
  uid=\$(awk '/^Uid:/ {print \$2}' /proc/\$p/status)
  gid=\$(awk '/^Gid:/ {print \$2}' /proc/\$p/status)
  groups=\$(awk '/^Groups:/ {\$1=""; print}' /proc/\$p/status | xargs | tr ' ' ,)
  shift
  if [ -n "\$groups" ]; then g="--groups=\$groups"; else g="--clear-groups"; fi
  setpriv --reuid=\$uid --regid=\$gid \$g "\$@"
}
# The control: each reads its own.
as lockstepd@0 cat /etc/lockstep/worker/0.key >/dev/null && echo "smoke: lockstepd@0 reads its key"
as lockstep-coordinator cat /etc/lockstep/coordinator/tokens >/dev/null &&
  echo "smoke: lockstep-coordinator reads its tokens"
for f in /etc/lockstep/coordinator/tls.key /etc/lockstep/coordinator/tokens; do
  if as lockstepd@0 cat \$f >/dev/null 2>&1; then echo "smoke: LEAK lockstepd@0 reads \$f"
  else echo "smoke: lockstepd@0 cannot read \$f"; fi
done
if as lockstep-coordinator cat /etc/lockstep/worker/0.key >/dev/null 2>&1; then
  echo "smoke: LEAK lockstep-coordinator reads /etc/lockstep/worker/0.key"
else echo "smoke: lockstep-coordinator cannot read /etc/lockstep/worker/0.key"; fi
systemd-analyze security lockstep-coordinator.service lockstepd@0.service | grep "Overall exposure"
systemctl poweroff
EOF
chmod +x "$root/smoke.sh"
cat >"$root/etc/systemd/system/smoke.service" <<'EOF'
[Unit]
Wants=lockstep-coordinator.service lockstepd@0.service lockstepd@1.service
After=lockstep-coordinator.service lockstepd@0.service lockstepd@1.service
[Service]
Type=oneshot
ExecStart=/smoke.sh
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/smoke.service "$root/etc/systemd/system/multi-user.target.wants/"

# No machined or system bus on the host needed: --register=no --keep-unit.
timeout 300 systemd-nspawn -D "$root" -b --register=no --keep-unit --console=pipe \
  >"$work/boot.log" 2>&1 || true
journalctl --directory="$root/var/log/journal" --no-pager -o cat >"$work/journal.txt" 2>&1 || true
grep -E "^smoke:|Overall exposure|SUCCEEDED|FAILED| [EW] (lockstepd|coordinator) " \
  "$work/journal.txt" || true
grep -q "^smoke: job exit 0" "$work/journal.txt"
! grep -q "^smoke: LEAK" "$work/journal.txt"
[ "$(grep -c "^smoke: .* cannot read " "$work/journal.txt")" -eq 3 ]
[ "$(grep -c "^smoke: .* reads its " "$work/journal.txt")" -eq 2 ]
