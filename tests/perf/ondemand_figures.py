# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures (a) and (b) of the on-demand rehearsal (tests/demo/ondemand.sh), from what it recorded:

    python3 tests/perf/ondemand_figures.py WORK T_SUBMIT T_RESUME T_REGISTERED T_DONE

WORK holds autoscaler.log (the controller's), <stand-in>.pull.json (each node's pull timings),
<stand-in>.started (when its container started: the instance's boot), registered.txt (each node's
name and when the rehearsal first saw it registered) and slurmctld-responding.txt (slurmctld's log lines
"Node gpu-N now responding": the registration's own time, taken where it is earlier). Times are epoch
seconds.
Prints the figures and writes WORK/figures.json.

The overhead beyond provisioning is each job's: from the resume call to its nodes' registration, less the
simulator's provisioning of that job's cluster networks, every attempt (a source out of capacity
included, from its create call to the answer); the figure is the largest. Before capacity sources there
was one cluster network per resume and the figure subtracted its provisioning alone; it is printed too,
as "first network only".
"""
import datetime
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '.build', 'collections'))
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import expand_hostlist  # noqa: E402


def log_time(line):
    m = re.match(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ', line)
    if not m:
        return None
    stamp = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S').replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp() + int(m.group(2)) / 1000.0


def first(lines, text):
    for line in lines:
        if text in line:
            return log_time(line)
    return None


def job_overheads(lines, called, registered):
    """{group: (provisioning, overhead)} for the groups of nodes (one per job) whose nodes all registered:
    provisioning is the sum of their cluster networks' attempts (create call to RUNNING or to a stock-out),
    overhead the time from the resume call to the last of them registered, less that."""
    attempts, started = {}, {}
    for line in lines:
        m = re.search(r' resume (\S+): (creating cluster network|cluster network \S+ (RUNNING|is out of host capacity))', line)
        if not m:
            continue
        group, when = m.group(1), log_time(line)
        if m.group(2) == 'creating cluster network':
            started[group] = when
        elif group in started:
            attempts.setdefault(group, []).append(when - started.pop(group))
    found = {}
    for group, spans in attempts.items():
        names = expand_hostlist(group)
        if all(n in registered for n in names):
            provisioning = sum(spans)
            found[group] = (provisioning, max(registered[n] for n in names) - called - provisioning)
    return found


def container_start(path):
    raw = open(path).read().strip()  # 2026-11-23 13:10:05.123456789 +0000 UTC
    m = re.match(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?', raw)
    stamp = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S').replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp() + float(m.group(2) or 0)


def main(work, t_submit, t_resume, t_registered, t_done):
    t_submit, t_resume, t_registered, t_done = (float(x) for x in (t_submit, t_resume, t_registered, t_done))
    lines = open(os.path.join(work, 'autoscaler.log')).read().splitlines()
    called = first(lines, ' INFO resume gpu-') or t_resume
    creating = first(lines, ': creating cluster network')
    running = first(lines, ' RUNNING (work request') or first(lines, ' RUNNING in ')  # with capacity sources: 'in <source>'
    nodes = []
    for path in sorted(glob.glob(os.path.join(work, '*.pull.json'))):
        name = os.path.basename(path)[:-len('.pull.json')]
        pull = json.load(open(path))
        started = container_start(os.path.join(work, name + '.started'))
        nodes.append(dict(standin=name, name=pull.get('name'), boot_to_pull=pull['started'] - started,
                          end=pull['started'] + pull.get('total', 0), **{k: pull.get(k) for k in (
                              'wait_tags', 'fetch_bundle', 'join', 'ansible', 'configure', 'configure_cpu', 'total', 'rc',
                              'baked')}))
    fig = dict(
        a_submit_to_resume=called - t_submit,
        b_resume_to_registered=t_registered - called,
        simulator_provisioning=(running - creating) if (running and creating) else None,
        boot_to_pull_start=max(n['boot_to_pull'] for n in nodes) if nodes else None,
        pull_after_tags=max(n['total'] - n['wait_tags'] for n in nodes) if nodes else None,
        pull_configure=max(n['configure'] for n in nodes) if nodes else None,
        registration=(t_registered - max(n['end'] for n in nodes)) if nodes else None,
        job_done=t_done - t_submit, nodes=nodes)
    registered = {}
    path = os.path.join(work, 'registered.txt')
    if os.path.exists(path):
        for line in open(path).read().splitlines():
            name, _sep, when = line.partition(' ')
            registered[name] = float(when)
    path = os.path.join(work, 'slurmctld-responding.txt')
    if os.path.exists(path):
        for line in open(path).read().splitlines():
            m = re.match(r'^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?\] Node (\S+) now responding$', line)
            if not m:
                continue
            stamp = datetime.datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S').replace(
                tzinfo=datetime.timezone.utc).timestamp() + float(m.group(2) or 0)
            if stamp >= called and stamp < registered.get(m.group(3), float('inf')):
                registered[m.group(3)] = stamp
    groups = job_overheads(lines, called, registered)
    fig['jobs'] = dict((g, dict(provisioning=p, overhead=o)) for g, (p, o) in groups.items())
    fig['overhead_first_network_only'] = (fig['b_resume_to_registered'] - fig['simulator_provisioning']
                                          if fig['simulator_provisioning'] is not None else None)
    fig['overhead_beyond_provisioning'] = (max(o for _p, o in groups.values()) if groups
                                           else fig['overhead_first_network_only'])

    cores = len(os.sched_getaffinity(0))

    def s(v):
        return '%6.1f s' % v if v is not None else '     ?'
    print('   (a) job submitted -> resume program called        %s   (goal: at most 5 s; a cron job: up to 60 s)' % s(fig['a_submit_to_resume']))
    print('   (b) resume called -> every node registered         %s' % s(fig['b_resume_to_registered']))
    print('       the simulator provisioning the cluster network %s' % s(fig['simulator_provisioning']))
    print('       instance boot -> pull start (slowest node)     %s' % s(fig['boot_to_pull_start']))
    print('       the pull after its tags (slowest node)         %s' % s(fig['pull_after_tags']))
    print('         of which the roles (configure)               %s' % s(fig['pull_configure']))
    print('       last pull done -> both nodes registered        %s' % s(fig['registration']))
    for group in sorted(groups):
        print('       job of %-10s resume -> registered %s, its cluster networks\' provisioning %s, overhead %s' % (
            group, s(groups[group][0] + groups[group][1]), s(groups[group][0]), s(groups[group][1])))
    print('       overhead with the first network\'s provisioning only %s' % s(fig['overhead_first_network_only']))
    overhead = fig['overhead_beyond_provisioning']
    if overhead is not None and nodes:
        if all(n.get('baked') for n in nodes):
            # On the baked image (docs/baking.md): the goals of a node that only finishes the job at its pull.
            print('   on the baked image: the pull after its tags, %d nodes at once on this machine\'s %d processors %s '
                  '(goal: at most 15 s)  %s' % (len(nodes), cores, s(fig['pull_after_tags']).strip(),
                                                'met' if fig['pull_after_tags'] <= 15 else 'NOT met'))
            # The pulls of the later steps, each while no other node pulls (the self-healing loop's new
            # instances): what a node on OCI, with processors of its own, takes.
            alone = []
            for later in ('heal-instance.json', 'static-instance.json'):
                path = os.path.join(work, later)
                if os.path.exists(path) and os.path.getsize(path):
                    pull = json.load(open(path))
                    if pull.get('baked') and pull.get('rc', 0) == 0 and 'total' in pull:
                        alone.append(pull['total'] - pull.get('wait_tags', 0))
            fig['pull_after_tags_alone'] = alone
            if alone:
                print('   on the baked image: the pull after its tags, a node alone %s (goal: at most 15 s)  %s' % (
                    ', '.join(s(a).strip() for a in alone), 'met' if max(alone) <= 15 else 'NOT met'))
            print('   overhead beyond provisioning %s (goal on the baked image: at most 30 s)  %s' % (
                s(overhead).strip(), 'met' if overhead <= 30 else 'NOT met'))
        else:
            goal = fig['pull_configure'] + 30
            print('   overhead beyond provisioning %s; goal on the stock image: the pull configure + 30 s = %s  %s' % (
                s(overhead).strip(), s(goal).strip(), 'met' if overhead <= goal else 'NOT met'))
    for n in nodes:
        print('   %s (%s, %s image): tags %.1f s, bundle %.1f s, join %.1f s, ansible-core %.1f s, roles %.1f s '
              '(%s of processor time), total %.1f s' % (
                  n['name'], n['standin'], 'baked' if n.get('baked') else 'stock', n['wait_tags'] or 0,
                  n['fetch_bundle'] or 0, n['join'] or 0, n['ansible'] or 0, n['configure'] or 0,
                  '%.1f s' % n['configure_cpu'] if n.get('configure_cpu') is not None else '?', n['total'] or 0))
    cpu = [n['configure_cpu'] for n in nodes if n.get('configure_cpu') is not None]
    if len(cpu) > 1:
        # Nodes that pull at once here share this machine's processors; on OCI each has its own.
        print('   the roles of the %d nodes: %.1f s of processor time together, at least %.1f s on this machine\'s %d '
              'processors' % (len(cpu), sum(cpu), sum(cpu) / cores, cores))
    print('   job submitted -> job done %s' % s(fig['job_done']))
    json.dump(fig, open(os.path.join(work, 'figures.json'), 'w'), indent=1, sort_keys=True)


if __name__ == '__main__':
    main(*sys.argv[1:6])
