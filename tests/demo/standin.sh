#!/usr/bin/env bash
# Instance hook of the demo's simulator (python -m tests.ocisim --on-instance ...): a launched
# instance gets a local stand-in, a systemd container at the instance's private IP on the podman
# network ocigpu-demo; a terminated instance loses it. The simulator passes OCISIM_* variables.
set -euo pipefail
name="ocigpu-demo-${OCISIM_DISPLAY_NAME}"
case "$OCISIM_EVENT" in
  launch)
    echo "$(date +%T) launch $OCISIM_DISPLAY_NAME $OCISIM_PRIVATE_IP ($OCISIM_SHAPE)"
    podman run -d --replace --name "$name" --hostname "${OCISIM_HOSTNAME:-$OCISIM_DISPLAY_NAME}" \
      --label ocigpu-demo=1 --label "ocigpu-demo-instance=$OCISIM_INSTANCE_ID" \
      --network "ocigpu-demo:ip=$OCISIM_PRIVATE_IP" --no-hosts --privileged --systemd=always \
      "${DEMO_IMAGE:-localhost/ocigpu-test:debian13}" /sbin/init ;;
  terminate)
    echo "$(date +%T) terminate $OCISIM_DISPLAY_NAME"
    podman rm -f -t 2 "$name" ;;
esac
