#!/usr/bin/env bash
# What a task skipped by its `when` costs under three strategies, in the same run, against this
# machine itself (connection local): Ansible's linear, Mitogen's own mitogen_linear, and the
# collection's ocigpu.cluster.mitogen_linear, which skips such a task in the controller's process
# and runs a set_fact there too (plugins/strategy/mitogen_linear.py, docs/playbooks.md). The playbook
# has SKIPPED tasks whose condition is false, then as many set_fact tasks; each strategy runs
# it ROUNDS times, alternating. Prints each strategy's best round: the milliseconds a skipped task and a
# set_fact took (from ansible.posix.profile_tasks), and each as a share of Mitogen's.
#
#   bash tests/perf/skip_bench.sh                 # 100 tasks of each kind, 3 rounds
#   SKIPPED=300 ROUNDS=5 bash tests/perf/skip_bench.sh
#
# Needs the tests' venv (tests/infra/venv.sh: ansible-core, Mitogen, the collection linked).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
SKIPPED=${SKIPPED:-100}
ROUNDS=${ROUNDS:-3}
work=$OCIGPU_ROOT/.build/perf/skip
rm -rf "$work"
mkdir -p "$work"
"$VENV/bin/python" - "$work/play.yml" "$SKIPPED" <<'PY'
import sys
path, count = sys.argv[1], int(sys.argv[2])
lines = ['- hosts: all', '  gather_facts: false', '  vars:', '    flag: false', '  tasks:']
for i in range(count):
    lines += ['    - name: skipped %d' % i, '      ansible.builtin.command: /bin/true', '      when: flag | bool']
for i in range(count):
    lines += ['    - name: ran %d' % i, '      ansible.builtin.set_fact:', '        fact_%d: %d' % (i, i)]
with open(path, 'w') as f:
    f.write('\n'.join(lines) + '\n')
PY
printf '[defaults]\ncallbacks_enabled = ansible.posix.profile_tasks\n' > "$work/ansible.cfg"
mitogen_plugins=$("$VENV/bin/python" -c 'import ansible_mitogen, os; print(os.path.join(os.path.dirname(ansible_mitogen.__file__), "plugins", "strategy"))')
# run NAME STRATEGY: one run; prints "skipped_ms ran_ms" (the mean of each kind of task).
run() {
  ANSIBLE_CONFIG=$work/ansible.cfg ANSIBLE_STRATEGY=$2 ANSIBLE_STRATEGY_PLUGINS=$mitogen_plugins ANSIBLE_NOCOLOR=1 \
    ANSIBLE_DEPRECATION_WARNINGS=0 ANSIBLE_COLLECTIONS_PATH="$OCIGPU_ROOT/.build/collections" \
    "$VENV/bin/ansible-playbook" -i localhost, -c local -e "ansible_python_interpreter=$VENV/bin/python" \
    "$work/play.yml" > "$work/$1.log" 2>&1 || { tail -20 "$work/$1.log" >&2; die "$1 failed"; }
  # profile_tasks writes each task's length on the next task's header line: (0:00:00.024).
  "$VENV/bin/python" - "$work/$1.log" <<'PY'
import re, sys
names, spans = [], []
for line in open(sys.argv[1]):
    if line.startswith('TASK ['):
        names.append(line[6:line.index(']')])
    m = re.search(r'\((\d+):(\d+):(\d+\.\d+)\)\s+\d+:\d+:\d+\.\d+', line)
    if m:
        spans.append(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
# spans[k] is the length of task k-1 (the first header has the play's start); the last task's is lost.
tasks = list(zip(names, spans[1:]))
skipped = [s for n, s in tasks if n.startswith('skipped ')]
ran = [s for n, s in tasks if n.startswith('ran ')]
print('%.2f %.2f' % (1000 * sum(skipped) / len(skipped), 1000 * sum(ran) / len(ran)))
PY
}
declare -A best_skip best_ran
names=(linear mitogen ocigpu)
declare -A strategy=([linear]=linear [mitogen]=mitogen_linear [ocigpu]=ocigpu.cluster.mitogen_linear)
for round in $(seq 1 "$ROUNDS"); do
  for name in "${names[@]}"; do
    read -r skip ran < <(run "$name-$round" "${strategy[$name]}")
    log "round $round, ${strategy[$name]}: a skipped task ${skip} ms, a set_fact ${ran} ms"
    if [ -z "${best_skip[$name]:-}" ] || awk -v a="$skip" -v b="${best_skip[$name]}" 'BEGIN { exit !(a < b) }'; then
      best_skip[$name]=$skip
      best_ran[$name]=$ran
    fi
  done
done
echo
echo "best of $ROUNDS rounds, $SKIPPED skipped tasks then $SKIPPED set_fact tasks, connection local:"
for name in "${names[@]}"; do
  printf '  %-32s a skipped task %6.2f ms (%.2f of Mitogen'"'"'s), a set_fact %6.2f ms (%.2f)\n' "${strategy[$name]}" \
    "${best_skip[$name]}" "$(awk -v a="${best_skip[$name]}" -v b="${best_skip[mitogen]}" 'BEGIN { print a / b }')" \
    "${best_ran[$name]}" "$(awk -v a="${best_ran[$name]}" -v b="${best_ran[mitogen]}" 'BEGIN { print a / b }')"
done
echo "reproduce: SKIPPED=$SKIPPED ROUNDS=$ROUNDS bash tests/perf/skip_bench.sh   (logs: .build/perf/skip/)"
