#!/usr/bin/env bash
# Prepare this machine for the role tests: Debian packages and a podman configuration that works
# on a host without systemd as PID 1 and without CAP_SYS_RESOURCE (see docs/testing.md).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

apt_install podman runc fuse-overlayfs slirp4netns uidmap debootstrap systemd-container \
  lvm2 xfsprogs qemu-system-x86 qemu-utils openssh-client rsync e2fsprogs dosfstools \
  ca-certificates curl jq iproute2 zstd shellcheck psmisc busybox-static prometheus

# promtool checks the alert rules (tests/unit/test_alert_rules.py); it comes in Debian's prometheus
# package, whose server the tests never need: stopped and off at boot (the package enables it, and
# starts it where it may).
if [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
else
  deb-systemd-helper disable prometheus.service >/dev/null 2>&1 || true
  update-rc.d prometheus disable >/dev/null 2>&1 || true
  [ ! -x /etc/init.d/prometheus ] || /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi

conf=/etc/containers/containers.conf
want='# Written by ocigpu.cluster tests/infra/host.sh: crun and the default ulimits fail on this host.
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"'
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  log "writing $conf"
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" > "$conf"
fi

# An sshd for the host-key test, unpacked, not installed (tests/infra/sshd.sh says why).
bash "$(dirname "$0")/sshd.sh"
