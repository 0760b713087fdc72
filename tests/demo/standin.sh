#!/usr/bin/env bash
# Instance hook of the demo's simulator (python -m tests.ocisim --on-instance ...): a launched
# instance gets a local stand-in, a systemd container at the instance's private IP on the podman
# network ocigpu-demo (and, for an instance with a public IP such as the bastion, at that IP on
# ocigpu-demo-public); a terminated instance loses it. The simulator passes OCISIM_* variables.
#
# An image made of an instance (CreateImage, OCISIM_EVENT=image) is its container committed to the podman
# image localhost/ocigpu-demo-image:<the image OCID's last 12 characters>, labelled ocigpu-demo-image=<OCID>;
# the simulator keeps the image PROVISIONING until this is done. An instance launched from that image
# starts from the committed container instead of DEMO_IMAGE.
#
# What cloud-init does on a real instance is done here the same way: the login user of the image
# (DEMO_LOGIN_USER, default opc) is created with password-less sudo and the instance metadata's
# ssh_authorized_keys, and sshd answers on port 22.
set -euo pipefail
name="ocigpu-demo-${OCISIM_DISPLAY_NAME}"
user=${DEMO_LOGIN_USER:-opc}
# The podman image of an OCI image OCID: its last 12 characters, lower-case, as the tag.
image_tag() { local id=$1; printf 'localhost/ocigpu-demo-image:%s' "$(tr '[:upper:]' '[:lower:]' <<<"${id: -12}")"; }
case "$OCISIM_EVENT" in
  launch)
    echo "$(date +%T) launch $OCISIM_DISPLAY_NAME $OCISIM_PRIVATE_IP${OCISIM_PUBLIC_IP:+ public $OCISIM_PUBLIC_IP} ($OCISIM_SHAPE)"
    nets=(--network "ocigpu-demo:ip=$OCISIM_PRIVATE_IP")
    [ -z "${OCISIM_PUBLIC_IP:-}" ] || nets+=(--network "ocigpu-demo-public:ip=$OCISIM_PUBLIC_IP")
    # The simulator gives a terminated instance's address to a new one as soon as the old one is
    # TERMINATED (1.5 s here), and its container may still be on its way out (the terminate hook
    # runs beside this one): podman refuses an address still held. A container that holds this
    # address belongs to a terminated instance, so it goes first; then the start is tried again.
    holders() {
      podman ps -aq --filter label=ocigpu-demo=1 | xargs -r podman inspect \
        -f '{{.Id}}{{range .NetworkSettings.Networks}} {{.IPAddress}}{{end}}' 2>/dev/null \
        | awk -v ip="$OCISIM_PRIVATE_IP" '{for (i = 2; i <= NF; i++) if ($i == ip) print $1}' || true
    }
    # An instance of an image made here (see the image event) starts from its committed container.
    image=${DEMO_IMAGE:-localhost/ocigpu-test:debian13}
    baked=''
    if [ -n "${OCISIM_IMAGE_ID:-}" ] && podman image exists "$(image_tag "$OCISIM_IMAGE_ID")" &&
       [ "$(podman image inspect -f '{{index .Labels "ocigpu-demo-image"}}' "$(image_tag "$OCISIM_IMAGE_ID")")" = "$OCISIM_IMAGE_ID" ]; then
      image=$(image_tag "$OCISIM_IMAGE_ID")
      baked=1
      echo "$(date +%T) $OCISIM_DISPLAY_NAME: from image $image"
    fi
    # No GPU here: all_reduce_perf replays a recorded run (all_reduce_perf-standin.sh says which).
    root=$(cd "$(dirname "$0")/../.." && pwd)
    replay=(-v "$root/tests/demo/all_reduce_perf-standin.sh:/usr/local/bin/all_reduce_perf:ro"
            -v "$root/tests/unit/data/nccl/seed000_a100_8gpu_10g.txt:/usr/local/share/ocigpu-demo/all_reduce_perf.txt:ro")
    # The shared home (DEMO_SHARED_HOME, make demo's cluster users): a folder of this machine.
    [ -z "${DEMO_SHARED_HOME:-}" ] || replay+=(-v "$DEMO_SHARED_HOME:/mnt/home")
    started=''
    for attempt in 1 2 3 4 5; do
      mapfile -t old < <(holders)
      if [ "${#old[@]}" -gt 0 ]; then
        echo "$(date +%T) $OCISIM_DISPLAY_NAME: $OCISIM_PRIVATE_IP still held by a terminated instance's container; removing it"
        podman rm -f -t 0 "${old[@]}" >/dev/null 2>&1 || true
      fi
      if podman run -d --replace --name "$name" --hostname "${OCISIM_HOSTNAME:-$OCISIM_DISPLAY_NAME}" \
          --label ocigpu-demo=1 --label "ocigpu-demo-instance=$OCISIM_INSTANCE_ID" \
          "${nets[@]}" --no-hosts --privileged --systemd=always "${replay[@]}" \
          "$image" /sbin/init; then
        started=1; break
      fi
      echo "$(date +%T) $OCISIM_DISPLAY_NAME: start attempt $attempt failed; trying again"
      sleep 2
    done
    [ -n "$started" ] || { echo "$(date +%T) STAND-IN FAILED: $OCISIM_DISPLAY_NAME did not start at $OCISIM_PRIVATE_IP"; exit 1; }
    # podman bind-mounts /etc/hostname, where hostnamectl cannot replace it ("Device or resource busy");
    # on an instance it is a plain file, which configure.yml rewrites for a replacement node.
    podman exec "$name" sh -c 'h=$(cat /etc/hostname); umount /etc/hostname && printf "%s\n" "$h" > /etc/hostname'
    if [ -n "$baked" ]; then
      # cloud-init gives a new instance its own SSH host keys before sshd starts; a cleaned image has none,
      # and sshd may have refused to start without them: it starts again once they exist.
      podman exec "$name" sh -c 'ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A
        timeout 60 systemctl is-system-running --wait >/dev/null 2>&1
        for unit in ssh.service sshd.service; do
          if systemctl cat "$unit" >/dev/null 2>&1 && ! systemctl is-active --quiet "$unit"; then
            systemctl reset-failed "$unit"; systemctl restart "$unit"
          fi
        done; true'
    fi
    keys=$(jq -r '.metadata.ssh_authorized_keys // ""' <<<"$OCISIM_INSTANCE_JSON")
    podman exec -i -e U="$user" -e IP="$OCISIM_PRIVATE_IP" "$name" sh -euc '
      id "$U" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$U"
      install -d -m 0700 -o "$U" -g "$U" "/home/$U/.ssh"
      cat > "/home/$U/.ssh/authorized_keys"
      chown "$U:$U" "/home/$U/.ssh/authorized_keys"; chmod 0600 "/home/$U/.ssh/authorized_keys"
      echo "$U ALL=(ALL) NOPASSWD:ALL" > "/etc/sudoers.d/90-cloud-init-users"
      chmod 0440 /etc/sudoers.d/90-cloud-init-users
      # The VCN resolver answers for the instance name on OCI; here, /etc/hosts does.
      grep -q " $(hostname)\$" /etc/hosts || echo "$IP $(hostname)" >> /etc/hosts
      # podman creates /dev/net/tun 0600; a host has it 0666 (rootless networking opens it).
      [ ! -e /dev/net/tun ] || chmod 0666 /dev/net/tun' <<<"$keys"
    echo "$(date +%T) $OCISIM_DISPLAY_NAME: user $user has the instance's SSH keys"
    # cloud-init runs the instance's user_data (a script) once the user exists. The node's metadata
    # service is the simulator's, reached through the demo's forwarder (DEMO_SIM_FORWARD).
    user_data=$(jq -r '.metadata.user_data // ""' <<<"$OCISIM_INSTANCE_JSON")
    if [ -n "$user_data" ]; then
      podman exec "$name" sh -c "printf 'OCIGPU_IMDS_URL=%s\\n' '${DEMO_SIM_FORWARD:-$OCISIM_ENDPOINT}/_imds/$OCISIM_INSTANCE_ID/opc/v2' > /etc/default/ocigpu-pull"
      # A container shares the machine's boot time, long before the node was asked to power up, and
      # slurmctld waits for a node that boots after that ("Still waiting for boot of node"). As on a
      # real instance, slurmd sees a boot just before it starts: it runs in a time namespace.
      podman exec -i "$name" sh -c 'cat > /usr/local/sbin/standin-slurmd; chmod 0755 /usr/local/sbin/standin-slurmd
        mkdir -p /etc/systemd/system/slurmd.service.d
        printf "[Service]\nNotifyAccess=all\nExecStart=\nExecStart=/usr/local/sbin/standin-slurmd --systemd \$SLURMD_OPTIONS\nExecStop=/usr/bin/pkill -TERM -P \$MAINPID -x slurmd\n" \
          > /etc/systemd/system/slurmd.service.d/zz-standin-boot.conf' <<'WRAPPER'
#!/bin/sh
# Demo stand-in: slurmd's start is this node's boot (a real node boots minutes after the power-up
# request, and its pull starts slurmd once, at its end).
# The unit's main process is unshare and slurmd its child. unshare --fork blocks SIGTERM while its
# child runs, and slurmd.service signals the main process alone (KillMode=process), so a stop would
# leave slurmd running and a restart's slurmd could not bind port 6818: the unit's ExecStop ends the
# child, and unshare exits with it. A start also ends a slurmd left from a start that was stopped
# before slurmd was its child (what systemd does to a real node's slurmd at its stop).
pkill -TERM -x slurmd
i=0
while [ "$i" -lt 100 ] && grep -qsx slurmd /proc/[0-9]*/comm; do sleep 0.2; i=$((i + 1)); done
pkill -KILL -x slurmd
exec /usr/bin/unshare --time --boottime "-$(cut -d. -f1 /proc/uptime)" --fork --kill-child=SIGTERM /usr/sbin/slurmd "$@"
WRAPPER
      podman exec "$name" timeout 60 systemctl is-system-running --wait >/dev/null 2>&1 || true
      if [ -n "$baked" ]; then
        # The image has munge and slurmd enabled, on the condition of the munge key that the join writes,
        # and firewalld enabled on the builder's zones.
        at_boot=$(podman exec "$name" sh -c 'for i in $(seq 60); do  # the boot done: every unit looked at
            case $(systemctl is-system-running 2>/dev/null) in running|degraded) break ;; esac; sleep 0.5; done
          for u in munge slurmd firewalld; do
          printf "%s %s %s (condition %s%s) " "$u" "$(systemctl is-enabled $u.service 2>/dev/null | head -1)" \
            "$(systemctl is-active $u.service)" "$(systemctl show -p ConditionResult --value $u.service)" \
            "$([ -n "$(systemctl show -p ConditionTimestamp --value $u.service)" ] && echo " at boot")"
          done')
        echo "$(date +%T) $OCISIM_DISPLAY_NAME: before its join: ${at_boot% }"
      fi
      base64 -d <<<"$user_data" | podman exec -i "$name" bash -s
      echo "$(date +%T) $OCISIM_DISPLAY_NAME: ran its user_data (cloud-init's part)"
    fi ;;
  image)
    # The image is the instance's container as it is now: whoever asked for it (the bake) must have
    # cleaned the instance first (host keys, machine-id, secrets, logs); nothing is cleaned here. The
    # container keeps running; the folders mounted into it (the shared home, the replayed run) are not
    # in the image.
    tag=$(image_tag "$OCISIM_IMAGE_ID")
    echo "$(date +%T) image $OCISIM_DISPLAY_NAME of $OCISIM_INSTANCE_ID -> $tag"
    mapfile -t ids < <(podman ps -aq --filter "label=ocigpu-demo-instance=$OCISIM_INSTANCE_ID")
    [ "${#ids[@]}" -eq 1 ] || { echo "$(date +%T) IMAGE FAILED: ${#ids[@]} containers for $OCISIM_INSTANCE_ID"; exit 1; }
    podman commit -q --change "LABEL ocigpu-demo-image=$OCISIM_IMAGE_ID" "${ids[0]}" "$tag" >/dev/null
    echo "$(date +%T) image $OCISIM_DISPLAY_NAME: $tag made" ;;
  terminate)
    echo "$(date +%T) terminate $OCISIM_DISPLAY_NAME"
    # By the instance's OCID: its display name may have changed since launch (the autoscaler names
    # its nodes <cluster>-<Slurm name>).
    mapfile -t ids < <(podman ps -aq --filter "label=ocigpu-demo-instance=$OCISIM_INSTANCE_ID")
    [ "${#ids[@]}" -eq 0 ] || podman rm -f -t 2 "${ids[@]}" >/dev/null ;;
esac
