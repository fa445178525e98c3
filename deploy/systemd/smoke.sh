#!/usr/bin/env bash
# Runs the hardened units under a real systemd: boots the image from deploy/docker/build.sh
# (plus Debian's systemd) with systemd-nspawn, starts lockstep-coordinator.service and
# lockstepd@0/@1 (one CPU each, --transport=shm: the two instances share /dev/shm as one
# dynamic user), trains the digits job on them over mutual TLS, prints what each unit runs
# as and its exposure as the booted systemd rates it, then powers off. Needs root, buildah,
# systemd-nspawn (Debian's systemd-container) and the image (deploy/docker/build.sh --no-run).
#   deploy/systemd/smoke.sh        # ends with "smoke: job exit 0" when everything worked
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
host=$(cat "$root/etc/hostname" 2>/dev/null || hostname)

# The units as README "Deploying" installs them; the group lockstep exists in the image.
cp deploy/systemd/lockstep-coordinator.service deploy/systemd/lockstepd@.service \
  "$root/etc/systemd/system/"
install -D -m 0644 deploy/systemd/lockstep.sysusers.conf "$root/usr/lib/sysusers.d/lockstep.conf"

# TLS: a CA, the coordinator's certificate (%H) and one per worker instance (%H-%i).
lockstep() { buildah run --user 0:0 "$ctr" -- lockstep "$@" >/dev/null; }
lockstep certs init --dir=/etc/lockstep/tls
lockstep certs issue --dir=/etc/lockstep/tls --name="$host" --san=localhost,127.0.0.1
for i in 0 1; do lockstep certs issue --dir=/etc/lockstep/tls --name="$host-$i"; done
rm "$root/etc/lockstep/tls/ca.key"
token=$(buildah run "$ctr" -- lockstep certs token)
echo "$token operator smoke" >"$root/etc/lockstep/tokens"
chgrp -R --reference="$root/var/lib/lockstep" "$root/etc/lockstep"
chmod -R g+rX,o-rwx "$root/etc/lockstep"

echo "LOCKSTEP_COORDINATOR=127.0.0.1:7000" >"$root/etc/default/lockstepd"
for i in 0 1; do
  echo "LOCKSTEPD_ARGS=--transport=shm --cpu_affinity=$i" >"$root/etc/default/lockstepd-$i"
done
sed 's|"examples/data/|"/opt/lockstep/examples/data/|' examples/jobs/digits_mlp.json \
  >"$root/opt/lockstep/smoke.json"

cat >"$root/smoke.sh" <<EOF
#!/bin/sh
C="--coordinator=127.0.0.1:7000 --tls_ca=/etc/lockstep/tls/ca.crt --token=$token"
for i in \$(seq 60); do lockstep status \$C 2>/dev/null | grep -q "2 ALIVE" && break; sleep 1; done
lockstep status \$C
lockstep submit /opt/lockstep/smoke.json --watch \$C
echo "smoke: job exit \$?"
for u in lockstepd@0 lockstepd@1; do
  p=\$(systemctl show -p MainPID --value \$u.service)
  echo "smoke: \$u" \$(grep -E "^(Uid|Groups|Cpus_allowed_list)" /proc/\$p/status)
done
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
