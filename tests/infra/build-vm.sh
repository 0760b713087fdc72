#!/usr/bin/env bash
# Build the Debian 13 (trixie) test VM for qemu under software emulation (TCG):
#   $OCIGPU_CACHE/vm/<recipe hash>/
#     root.img     ext4 root disk (label ocigpu-root), raw; VMs boot copy-on-write overlays of it
#     vmlinuz      Debian's generic kernel (device-mapper, rdma_rxe, dummy as modules)
#     initrd.img   its initramfs (NVMe + ext4 drivers)
#     id_ed25519   ssh key of the guest user `ocigpu` (passwordless sudo)
# An unchanged recipe (this script + vm/packages.txt) returns at once. Prints the folder on stdout.
#
# Environment: OCIGPU_CACHE, OCIGPU_DEBIAN_MIRROR (default: this machine's apt mirror),
# OCIGPU_VM_ROOT_SIZE (default 4G), OCIGPU_FORCE=1 (rebuild).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

HERE="$OCIGPU_ROOT/tests/infra"
. "$HERE/image/rootfs.sh"
GUEST_USER=ocigpu
ROOT_SIZE=${OCIGPU_VM_ROOT_SIZE:-4G}

for tool in mkfs.ext4 qemu-system-x86_64 qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null || die "$tool is missing: run tests/infra/host.sh first"
done

recipe=$(recipe_hash "$HERE/build-vm.sh" "$HERE/image/rootfs.sh" "$HERE/vm/packages.txt" \
  "$HERE/vm/ocigpu_zipimport_cache.py")
out="$OCIGPU_CACHE/vm/$recipe"
if [ -f "$out/done" ] && [ "${OCIGPU_FORCE:-0}" != 1 ]; then
  log "VM image is up to date: $out"
  printf '%s\n' "$out"
  exit 0
fi

log "building the VM image (recipe $recipe) in $out"
total_start=$(date +%s)
mkdir -p "$OCIGPU_CACHE/vm"
work=$(mktemp -d "$OCIGPU_CACHE/vm/build.XXXXXX")
tree="$work/tree"
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# 1. Base system: the shared debootstrap tarball (image/rootfs.sh).
tarball=$(rootfs_tarball)
mkdir -p "$tree"
tar --numeric-owner --xattrs -xpf "$tarball" -C "$tree"

# 2. Packages, installed in a chroot. The initramfs carries only what finds the root disk.
mkdir -p "$tree/etc/initramfs-tools/conf.d"
echo MODULES=list > "$tree/etc/initramfs-tools/conf.d/ocigpu.conf"
printf '%s\n' nvme nvme_core ext4 crc32c_generic > "$tree/etc/initramfs-tools/modules"
printf '#!/bin/sh\nexit 101\n' > "$tree/usr/sbin/policy-rc.d"
chmod 0755 "$tree/usr/sbin/policy-rc.d"
for m in proc sys dev dev/pts; do
  case $m in
    proc) mount -t proc proc "$tree/proc" ;;
    sys) mount -t sysfs sys "$tree/sys" ;;
    *) mount --bind "/$m" "$tree/$m" ;;
  esac
  mounted+=("$tree/$m")
done
cp /etc/resolv.conf "$tree/etc/resolv.conf"
log "installing $(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/vm/packages.txt" | wc -l) packages in the chroot (kernel, initramfs, ssh, lvm2, rdma-core, ...)"
start=$(date +%s)
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/vm/packages.txt" > "$tree/tmp/packages.txt"
chroot "$tree" /bin/sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/packages.txt apt-get install -y -qq --no-install-recommends' \
  > "$work/apt.log" 2>&1 || { tail -n 40 "$work/apt.log" >&2; die "package installation failed"; }
log "packages installed in $(( $(date +%s) - start ))s"

# 3. Guest configuration.
chroot "$tree" /bin/sh -e <<GUEST >> "$work/apt.log" 2>&1
useradd -m -s /bin/bash $GUEST_USER
echo '$GUEST_USER ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/90-$GUEST_USER
chmod 0440 /etc/sudoers.d/90-$GUEST_USER
systemctl enable systemd-networkd.service ssh.service
# Nothing that waits for a network, a clock or a console slows the boot.
systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service \
  getty@tty1.service serial-getty@ttyS0.service lvm2-monitor.service systemd-journal-flush.service \
  systemd-pstore.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount \
  sys-kernel-debug.mount sys-kernel-tracing.mount dev-hugepages.mount dev-mqueue.mount \
  modprobe@drm.service modprobe@efi_pstore.service modprobe@fuse.service \
  systemd-hwdb-update.service ldconfig.service systemd-update-utmp.service \
  systemd-update-utmp-runlevel.service systemd-tmpfiles-clean.timer dpkg-db-backup.timer \
  nvmf-autoconnect.service modprobe@nvme_fabrics.service \
  2>/dev/null || true
# NetworkManager is installed (rdma_network's package) but left off: the role starts it once its
# test has told it to keep away from eth0.
systemctl disable NetworkManager.service NetworkManager-wait-online.service \
  NetworkManager-dispatcher.service 2>/dev/null || true
apt-get clean
GUEST
rm -f "$tree/usr/sbin/policy-rc.d" "$tree/tmp/packages.txt" "$tree/etc/resolv.conf"
# qemu's user network answers DNS on .3 of the guest network (no resolver daemon to start).
echo "nameserver 198.18.100.3" > "$tree/etc/resolv.conf"
rm -rf "$tree/var/lib/apt/lists/"*
echo "LABEL=ocigpu-root / ext4 defaults,noatime 0 1" > "$tree/etc/fstab"
# Emulation on a busy host is slow: no watchdog may kill journald, no start timeout may fail a unit,
# the journal stays in memory, and the vsock ssh generator (no vsock here) stays off.
mkdir -p "$tree/etc/systemd/system.conf.d" "$tree/etc/systemd/journald.conf.d" \
  "$tree/etc/systemd/system/systemd-journald.service.d" "$tree/etc/systemd/system-generators"
printf '[Manager]\nDefaultTimeoutStartSec=600\nDefaultDeviceTimeoutSec=600\nRuntimeWatchdogSec=off\n' \
  > "$tree/etc/systemd/system.conf.d/50-ocigpu-tcg.conf"
printf '[Journal]\nStorage=volatile\n' > "$tree/etc/systemd/journald.conf.d/50-ocigpu-tcg.conf"
printf '[Service]\nWatchdogSec=0\n' > "$tree/etc/systemd/system/systemd-journald.service.d/50-ocigpu-tcg.conf"
ln -sf /dev/null "$tree/etc/systemd/system-generators/systemd-ssh-generator"
echo ocigpu-vm > "$tree/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$tree/etc/hosts"
# The first NIC (eth0) gets DHCP from qemu's user network; the others are left to the roles.
cat > "$tree/etc/systemd/network/10-eth0.network" <<'NET'
[Match]
Name=eth0

[Network]
DHCP=ipv4
NET
mkdir -p "$tree/etc/ssh/sshd_config.d"
cat > "$tree/etc/ssh/sshd_config.d/50-ocigpu.conf" <<'SSHD'
PasswordAuthentication no
UseDNS no
SSHD
ssh-keygen -q -t ed25519 -N '' -C "ocigpu-test-vm" -f "$work/id_ed25519"
install -d -m 0700 "$tree/home/$GUEST_USER/.ssh"
install -m 0600 "$work/id_ed25519.pub" "$tree/home/$GUEST_USER/.ssh/authorized_keys"
chroot "$tree" chown -R "$GUEST_USER:$GUEST_USER" "/home/$GUEST_USER/.ssh"

# Ansible's modules run from zip files, whose libraries Python compiles afresh on every task;
# under emulation that is half a task's time. A .pth hook keeps the compiled code (see the file).
site=$(chroot "$tree" python3 -c 'import sys; print("/usr/local/lib/python3.%d/dist-packages" % sys.version_info[1])')
install -d "$tree$site"
install -m 0644 "$HERE/vm/ocigpu_zipimport_cache.py" "$tree$site/ocigpu_zipimport_cache.py"
echo 'import ocigpu_zipimport_cache; ocigpu_zipimport_cache.install()' > "$tree$site/ocigpu-zipimport-cache.pth"
install -d -m 1777 "$tree/var/cache/ocigpu-zipimport"

for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}"; done
mounted=()

# 4. Kernel out, tree into an ext4 image.
cp "$tree"/boot/vmlinuz-* "$work/vmlinuz"
cp "$tree"/boot/initrd.img-* "$work/initrd.img"
log "kernel $(basename "$tree"/boot/vmlinuz-*), initrd $(du -h "$work/initrd.img" | cut -f1)"
start=$(date +%s)
truncate -s "$ROOT_SIZE" "$work/root.img"
mkfs.ext4 -q -L ocigpu-root -d "$tree" "$work/root.img"
log "root disk ($ROOT_SIZE, $(du -sh "$tree" | cut -f1) used) written in $(( $(date +%s) - start ))s"

rm -rf "$out"
mkdir -p "$out"
mv "$work/root.img" "$work/vmlinuz" "$work/initrd.img" "$work/id_ed25519" "$work/id_ed25519.pub" "$out/"
printf 'recipe=%s\nuser=%s\nbuilt=%s\n' "$recipe" "$GUEST_USER" "$(date -u +%FT%TZ)" > "$out/done"
# Older builds are dead weight (running VMs keep their backing file open, so only remove unused ones).
for old in "$OCIGPU_CACHE"/vm/*/done; do
  d=$(dirname "$old")
  [ "$d" = "$out" ] && continue
  if command -v fuser >/dev/null && ! fuser -s "$d/root.img" 2>/dev/null; then rm -rf "$d"; fi
done
log "VM image built in $(( $(date +%s) - total_start ))s: $out"
printf '%s\n' "$out"
