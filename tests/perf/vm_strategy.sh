#!/usr/bin/env bash
# What Mitogen's strategy buys against the test VM (qemu TCG), the reason molecule/node_vm uses it.
#
# Boots one VM (tests/infra/vm.sh), then runs the same small play ROUNDS times with each strategy,
# alternating, so both see the same load: fact gathering (the first connection), five `command`
# tasks, `copy`, `file`, `systemd_service` and `apt` (nothing to change). Prints each strategy's
# median per task type and in all, and Mitogen's time as a share of the linear strategy's.
#
#   bash tests/perf/vm_strategy.sh            # 2 rounds
#   ROUNDS=3 bash tests/perf/vm_strategy.sh
#
# Needs tests/infra/venv.sh and build-vm.sh. Logs: .build/perf/vm_strategy/.
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
ROUNDS=${ROUNDS:-2}
work=$OCIGPU_ROOT/.build/perf/vm_strategy
rm -rf "$work"; mkdir -p "$work"
export PATH="$VENV/bin:$PATH" ANSIBLE_HOST_KEY_CHECKING=false ANSIBLE_PIPELINING=true \
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks ANSIBLE_FORCE_COLOR=0
vm=perfvm
trap 'bash tests/infra/vm.sh down "$vm" >/dev/null 2>&1 || true' EXIT
bash tests/infra/build-vm.sh >/dev/null
conn=$(bash tests/infra/vm.sh up "$vm" --nics 1 | tail -1)
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$conn" "$1"; }
printf '%s ansible_host=%s ansible_port=%s ansible_user=%s ansible_ssh_private_key_file=%s ansible_ssh_common_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"\n' \
  "$vm" "$(field host)" "$(field port)" "$(field user)" "$(field key)" > "$work/inventory"
cat > "$work/play.yml" <<'EOF'
- name: Tasks of the kinds the roles run
  hosts: all
  become: true
  gather_facts: true
  tasks:
    - name: Run a command
      ansible.builtin.command: "true"
      changed_when: false
      loop: [1, 2, 3, 4, 5]
    - name: Write a file
      ansible.builtin.copy: {dest: /tmp/ocigpu-perf.conf, content: "a\n", mode: "0644"}
    - name: Make a folder
      ansible.builtin.file: {path: /tmp/ocigpu-perf.d, state: directory, mode: "0755"}
    - name: Keep a unit running
      ansible.builtin.systemd_service: {name: ssh, state: started}
    - name: Keep a package installed
      ansible.builtin.apt: {name: [openssh-server], state: present}
EOF
for r in $(seq "$ROUNDS"); do
  for s in linear mitogen_linear; do
    log "round $r: $s"
    # ocigpu.cluster.mitogen_linear: Mitogen's strategy, as molecule runs it.
    ANSIBLE_COLLECTIONS_PATH=$OCIGPU_ROOT/.build/collections ANSIBLE_STRATEGY=${s/#mitogen_linear/ocigpu.cluster.mitogen_linear} \
      ansible-playbook -i "$work/inventory" "$work/play.yml" > "$work/$s.$r.log" 2>&1
  done
done
python3 - "$work" "$ROUNDS" <<'EOF'
import re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for s in ('linear', 'mitogen_linear'):
    for r in range(1, rounds + 1):
        text = open(f'{work}/{s}.{r}.log').read().split('TASKS RECAP')[-1]
        for name, sec in re.findall(r'^(\S.*?) -+ ([0-9.]+)s$', text, re.M):
            rows.setdefault(name, {}).setdefault(s, []).append(float(sec))
print(f'seconds, median of {rounds} rounds each, one VM under qemu TCG:')
print(f'  {"task":40} {"linear":>8} {"mitogen":>8} {"ratio":>6}')
tot = {'linear': 0.0, 'mitogen_linear': 0.0}
for name, by in rows.items():
    a, b = statistics.median(by['linear']), statistics.median(by['mitogen_linear'])
    tot['linear'] += a; tot['mitogen_linear'] += b
    print(f'  {name[:40]:40} {a:8.1f} {b:8.1f} {b / a:6.2f}')
a, b = tot['linear'], tot['mitogen_linear']
print(f'  {"all":40} {a:8.1f} {b:8.1f} {b / a:6.2f}')
EOF
echo "reproduce: ROUNDS=$ROUNDS bash tests/perf/vm_strategy.sh    (logs: .build/perf/vm_strategy/)"
