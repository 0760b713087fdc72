#!/usr/bin/env bash
# Run test VMs (Debian 13, qemu TCG) built by build-vm.sh.
#
#   vm.sh up NAME [--disks N] [--disk-size SIZE] [--nics N] [--mem MiB] [--cpus N (1)] [--timeout S]
#       Boots NAME on a copy-on-write overlay of the cached root disk with N emulated NVMe data disks
#       (serial NAME-dataI, so /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_NAME-dataI is stable) and N NICs
#       (eth0 carries ssh; eth1.. are left unconfigured). qemu user networking, guest subnets
#       198.18.100.0/24 + i. Waits for ssh and writes the connection data to
#       $OCIGPU_VM_RUN/NAME/connection.json (also printed on stdout).
#   vm.sh down NAME      powers NAME off (kills its own qemu by pid file if it does not stop) and
#                        removes its overlay and disks.
#   vm.sh ssh NAME [COMMAND...]   ssh into NAME as the guest user (sudo works without a password).
#   vm.sh status NAME    prints the connection data when NAME runs; exits 1 otherwise.
#   vm.sh list           lists running VMs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RUN_DIR=${OCIGPU_VM_RUN:-$OCIGPU_CACHE/vm-run}
MAX_NICS=4   # 198.18.100.0/22 holds four /24 guest networks

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

state_dir() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,40}$ ]] || die "bad VM name '$1' (letters, digits, - and _)"
  printf '%s/%s\n' "$RUN_DIR" "$1"
}

# qemu_pid NAME : the pid of NAME's qemu when it is alive and really is that qemu.
qemu_pid() {
  local dir pid
  dir=$(state_dir "$1")
  [ -s "$dir/qemu.pid" ] || return 1
  pid=$(cat "$dir/qemu.pid")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "-name ocigpu-$1 " || return 1
  printf '%s\n' "$pid"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ssh_opts() {
  local dir=$1
  printf '%s\n' -i "$dir/id_ed25519" -p "$(cat "$dir/ssh.port")" -o BatchMode=yes \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5
}

cmd_up() {
  local name=${1:-}; [ -n "$name" ] || usage; shift
  local disks=0 disk_size=1G nics=1 mem=1024 cpus=1 timeout=300
  while [ $# -gt 0 ]; do
    case $1 in
      --disks) disks=$2; shift 2 ;;
      --disk-size) disk_size=$2; shift 2 ;;
      --nics) nics=$2; shift 2 ;;
      --mem) mem=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  if ! { [[ $disks =~ ^[0-9]+$ ]] && [ "$disks" -le 16 ]; }; then die "--disks must be 0-16"; fi
  if ! { [[ $nics =~ ^[0-9]+$ ]] && [ "$nics" -ge 1 ] && [ "$nics" -le "$MAX_NICS" ]; }; then die "--nics must be 1-$MAX_NICS"; fi

  local dir image pid port start
  dir=$(state_dir "$name")
  if pid=$(qemu_pid "$name"); then
    log "VM $name already runs (pid $pid)"
    cat "$dir/connection.json"
    return 0
  fi
  image=$(bash "$OCIGPU_ROOT/tests/infra/build-vm.sh")
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$image/id_ed25519" "$dir/id_ed25519"
  chmod 0600 "$dir/id_ed25519"
  qemu-img create -q -f qcow2 -b "$image/root.img" -F raw "$dir/root.qcow2"

  # systemd's 90 s default job timeouts: the root disk's device unit alone takes 40 s under
  # emulation on a busy machine, and a boot whose device wait runs out never reaches ssh.
  # shellcheck disable=SC2054  # the commas belong to qemu's option syntax
  local args=(
    -name "ocigpu-$name" -accel tcg,thread=multi -smp "$cpus" -m "$mem"
    -display none -vga none -serial "file:$dir/console.log" -monitor none -parallel none
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img"
    -append "root=LABEL=ocigpu-root rw console=ttyS0 net.ifnames=0 systemd.hostname=$name mitigations=off systemd.default_device_timeout_sec=900 systemd.default_timeout_start_sec=900 ${OCIGPU_VM_APPEND:-quiet}"
    -drive "file=$dir/root.qcow2,if=none,id=root,format=qcow2,cache=unsafe"
    -device "nvme,drive=root,serial=$name-root"
  )
  local i
  for ((i = 1; i <= disks; i++)); do
    qemu-img create -q -f qcow2 "$dir/data$i.qcow2" "$disk_size"
    args+=(-drive "file=$dir/data$i.qcow2,if=none,id=data$i,format=qcow2,cache=unsafe"
           -device "nvme,drive=data$i,serial=$name-data$i")
  done
  port=$(free_port)
  echo "$port" > "$dir/ssh.port"
  # romfile= skips the iPXE option ROM (the kernel is loaded directly).
  args+=(-netdev "user,id=n0,net=198.18.100.0/24,host=198.18.100.2,dhcpstart=198.18.100.15,hostname=$name,hostfwd=tcp:127.0.0.1:$port-:22"
         -device "virtio-net-pci,netdev=n0,romfile=")
  for ((i = 1; i < nics; i++)); do
    # Extra NICs: isolated user networks (restrict=on: no way out of the guest through them).
    args+=(-netdev "user,id=n$i,net=198.18.$((100 + i)).0/24,restrict=on" -device "virtio-net-pci,netdev=n$i,romfile=")
  done

  log "booting VM $name: $disks NVMe data disk(s) of $disk_size, $nics NIC(s), ssh on 127.0.0.1:$port"
  start=$(date +%s)
  # Emulation shares two cores with the container scenarios running beside it. At equal priority
  # they left qemu a fifth to a third of a core and the boot had not reached ssh after 900 s; with
  # a higher priority it got most of a core and reached ssh in 142 s beside the same load.
  nice -n "${OCIGPU_VM_NICE:--10}" qemu-system-x86_64 "${args[@]}" -daemonize -pidfile "$dir/qemu.pid" \
    > "$dir/qemu.out" 2> "$dir/qemu.err" || { cat "$dir/qemu.err" >&2; die "qemu did not start"; }

  local -a opts
  mapfile -t opts < <(ssh_opts "$dir")
  until ssh "${opts[@]}" ocigpu@127.0.0.1 true 2>/dev/null; do
    qemu_pid "$name" >/dev/null || { tail -n 20 "$dir/console.log" >&2; die "qemu of $name exited during boot"; }
    if [ $(( $(date +%s) - start )) -ge "$timeout" ]; then
      tail -n 30 "$dir/console.log" >&2
      cp "$dir/console.log" "$RUN_DIR/$name.failed-console.log" 2>/dev/null || true
      log "console log kept in $RUN_DIR/$name.failed-console.log"
      cmd_down "$name"
      die "VM $name: no ssh after ${timeout}s"
    fi
    sleep 1
  done
  local boot=$(( $(date +%s) - start ))
  printf '{"name": "%s", "host": "127.0.0.1", "port": %s, "user": "ocigpu", "key": "%s", "disks": %s, "nics": %s, "boot_seconds": %s}\n' \
    "$name" "$port" "$dir/id_ed25519" "$disks" "$nics" "$boot" > "$dir/connection.json"
  log "VM $name is up after ${boot}s (ssh -i $dir/id_ed25519 -p $port ocigpu@127.0.0.1)"
  cat "$dir/connection.json"
}

cmd_down() {
  local name=${1:-}; [ -n "$name" ] || usage
  local dir pid i
  dir=$(state_dir "$name")
  if pid=$(qemu_pid "$name"); then
    local -a opts
    mapfile -t opts < <(ssh_opts "$dir")
    log "powering off VM $name (pid $pid)"
    ssh "${opts[@]}" ocigpu@127.0.0.1 'sudo systemctl poweroff' >/dev/null 2>&1 || true
    for ((i = 0; i < 30; i++)); do
      qemu_pid "$name" >/dev/null || break
      sleep 1
    done
    if qemu_pid "$name" >/dev/null; then
      log "VM $name did not power off in 30s: killing pid $pid"
      kill "$pid" 2>/dev/null || true
      sleep 1
      ! qemu_pid "$name" >/dev/null || kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
  log "VM $name is down"
}

cmd_ssh() {
  local name=${1:-}; [ -n "$name" ] || usage; shift
  local dir; dir=$(state_dir "$name")
  qemu_pid "$name" >/dev/null || die "VM $name is not running"
  local -a opts
  mapfile -t opts < <(ssh_opts "$dir")
  exec ssh "${opts[@]}" ocigpu@127.0.0.1 "$@"
}

cmd_status() {
  local name=${1:-}; [ -n "$name" ] || usage
  local dir; dir=$(state_dir "$name")
  if ! { qemu_pid "$name" >/dev/null && [ -s "$dir/connection.json" ]; }; then log "VM $name is not running"; return 1; fi
  cat "$dir/connection.json"
}

cmd_list() {
  local d
  for d in "$RUN_DIR"/*/; do
    [ -d "$d" ] || continue
    qemu_pid "$(basename "$d")" >/dev/null && cat "$d/connection.json" 2>/dev/null
  done
  return 0
}

case ${1:-} in
  up|down|ssh|status|list) cmd=$1; shift; "cmd_$cmd" "$@" ;;
  *) usage ;;
esac
