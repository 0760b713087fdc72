# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service's heartbeat (requests.py): the service killed (SIGKILL, not restarted) in the middle of a
resume, against the simulator and the model of slurmctld; the programs then hand the nodes back with a
reason and Slurm requeues the jobs. And the heartbeat itself: written by a thread, read by `status`."""
from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
import time

from ocigpu_control import programs, requests
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    config, live, sim)
from tests.unit.controller.test_autoscale_faults import ROOT, logged, nothing_billable, program_config
from tests.unit.controller.test_autoscale_service import make, resume_file, run_all

REASON = 'reason=ocigpu-autoscaler: the autoscaler service is not running'


def wait_for(test, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, 'waited %ds for %s' % (timeout, what)
        time.sleep(0.05)


def age_heartbeat(conf, seconds):
    """The heartbeat as it reads `seconds` after the service wrote it (nothing writes it any more)."""
    path = requests.heartbeat_path(conf)
    with open(path) as f:
        beat = json.load(f)
    beat['time'] -= seconds
    with open(path, 'w') as f:
        json.dump(beat, f)


def kill_during_resume(sim, tmp_path, config, monkeypatch):  # pylint: disable=redefined-outer-name
    """Run the real service, hand it a resume of job 1 on gpu-[1-2], SIGKILL it while the cluster network
    is PROVISIONING; returns (config path, fake Slurm, the killed service, the cluster network's id)."""
    path = program_config(tmp_path, config, scontrol='true', squeue='true')
    fake = FakeSlurm(config['node_names'])
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, '.build', 'collections'),
                                                       os.path.join(ROOT, 'controller')]))
    program = 'import sys; from ocigpu_control import programs; sys.exit(programs.main(sys.argv[1:]))'
    service = subprocess.Popen([sys.executable, '-c', program, '--config', path, 'service'], env=env,  # pylint: disable=consider-using-with
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: requests.service_alive(config), 'the service to beat')
        monkeypatch.setenv('SLURM_RESUME_FILE', resume_file(tmp_path, [(1, 'gpu-[1-2]')]))
        assert programs.main(['--config', path, 'resume', 'gpu-[1-2]'], run=fake.run) == 0
        # The service's waiter sleeps in real time and the simulator's clock stands still: PROVISIONING.
        wait_for(lambda: [c['lifecycleState'] for c in live(sim, 'cluster_networks')] == ['PROVISIONING'],
                 'the cluster network to be made')
    finally:
        service.kill()
        output = service.communicate(timeout=30)[0]
    assert service.returncode == -9, output
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    assert fake.nodes['gpu-1']['state'] == {'IDLE', 'CLOUD', 'POWERING_UP'} and fake.jobs[1]['state'] == 'CONFIGURING'
    assert len(requests.in_flight_resumes(config)) == 1  # the request the killed service worked on
    return path, fake, service, cn_id


def test_the_service_killed_during_a_resume_the_programs_hand_the_nodes_back(sim, tmp_path, config, monkeypatch):  # pylint: disable=redefined-outer-name
    path, fake, service, cn_id = kill_during_resume(sim, tmp_path, config, monkeypatch)
    # Within stale_after (3 polls and 30 s: 33 s here) the service still counts as alive; past it, the
    # next program Slurm runs (here the resume of another job) hands back its own nodes and those the
    # dead service left in flight, with the reason. Rather than wait, the heartbeat is made that old.
    assert requests.stale_after(config) == 33
    assert requests.service_alive(config)
    age_heartbeat(config, requests.stale_after(config) + 1)
    fake.allocate(2, ['gpu-3'])
    monkeypatch.setenv('SLURM_RESUME_FILE', resume_file(tmp_path, [(2, 'gpu-3')]))
    assert programs.main(['--config', path, 'resume', 'gpu-3'], run=fake.run) == 1
    assert [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c] == [
        ['true', 'update', 'nodename=gpu-[1-2]', 'state=POWER_DOWN_FORCE', REASON],
        ['true', 'update', 'nodename=gpu-3', 'state=POWER_DOWN_FORCE', REASON]]
    # slurmctld powers them down and requeues both jobs.
    assert fake.jobs[1]['state'] == fake.jobs[2]['state'] == 'PENDING'
    assert fake.nodes['gpu-1']['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}
    assert fake.nodes['gpu-2']['reason'] == 'ocigpu-autoscaler: the autoscaler service is not running'
    assert requests.in_flight_resumes(config) == [] and requests.service_alive(config) is False
    line, = logged(config, 'resume gpu-[1-2] (request ')
    assert line.endswith(': the autoscaler service is not running (last heartbeat 34s ago from pid %d (not running after 33s)); '
                         'gpu-[1-2] handed back to Slurm (state=POWER_DOWN_FORCE)' % service.pid)
    logged(config, 'resume gpu-3: the autoscaler service is not running (last heartbeat 34s ago')
    logged(config, 'gpu-3 handed back to Slurm (state=POWER_DOWN_FORCE)')

    # slurmctld runs the suspend program for the nodes it powered down: the request is written all the
    # same, and carried out when the service is back; it ends what the killed service made.
    assert programs.main(['--config', path, 'suspend', 'gpu-[1-3]'], run=fake.run) == 0
    logged(config, 'suspend gpu-[1-3]: the autoscaler service is not running')
    assert [c['id'] for c in live(sim, 'cluster_networks')] == [cn_id]
    _conf, svc = make(config, fake)
    run_all(svc)
    assert nothing_billable(sim)


def test_no_heartbeat_at_all_a_resume_hands_back_a_suspend_waits(tmp_path, config):  # pylint: disable=redefined-outer-name
    path = program_config(tmp_path, config, scontrol='true')
    fake = FakeSlurm(config['node_names'])
    fake.allocate(4, ['gpu-5'])
    assert not os.path.exists(requests.heartbeat_path(config))
    assert programs.main(['--config', path, 'resume', 'gpu-5'], run=fake.run) == 1
    assert fake.commands == [['true', 'update', 'nodename=gpu-5', 'state=POWER_DOWN_FORCE', REASON]]
    assert fake.jobs[4]['state'] == 'PENDING' and requests.in_flight_resumes(config) == []
    logged(config, 'resume gpu-5: the autoscaler service is not running (no heartbeat (%s missing or unreadable))'
           % requests.heartbeat_path(config))
    assert programs.main(['--config', path, 'suspend', 'gpu-5'], run=fake.run) == 0
    assert len(fake.commands) == 1 and os.listdir(requests.request_dir(config))[0].endswith('.json')


def test_the_heartbeat_thread_writes_until_the_loop_stops(tmp_path, config):  # pylint: disable=redefined-outer-name
    conf = dict(config, poll_interval=0.05)
    stop = threading.Event()
    thread = requests.keep_beating(conf, stop)
    wait_for(lambda: requests.heartbeat(conf) is not None, 'a heartbeat')
    first = requests.heartbeat(conf)
    wait_for(lambda: requests.heartbeat(conf)['time'] > first['time'], 'a second heartbeat')
    assert first['pid'] == os.getpid() and requests.service_alive(conf)
    # Readable by anyone on the controller (it says only that the service runs, and its pid).
    assert stat.S_IMODE(os.stat(requests.heartbeat_path(conf)).st_mode) == 0o644
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert not requests.service_alive(conf, now=time.time() + requests.stale_after(conf) + 1)


def test_status_prints_the_heartbeats_age(sim, tmp_path, config, capsys):  # pylint: disable=redefined-outer-name
    path = program_config(tmp_path, config)
    requests.beat(config, time.time())
    age_heartbeat(config, 12)
    out = io.StringIO()
    assert programs.main(['--config', path, 'status'], out=out) == 0
    assert json.loads(out.getvalue()) == []
    assert 'service: last heartbeat 12s ago from pid %d (alive after 33s)' % os.getpid() in capsys.readouterr().err


def test_the_watchdog_hands_back_what_a_killed_service_left_in_flight(sim, tmp_path, config, monkeypatch):  # pylint: disable=redefined-outer-name
    """Slurm runs no program after the service died: the watchdog timer (every 20 s) hands the nodes back
    once the heartbeat is stale, within stale_after + 20 s = 53 s of the death with the role's defaults."""
    path, fake, service, _cn_id = kill_during_resume(sim, tmp_path, config, monkeypatch)
    # While the heartbeat is fresh, the watchdog leaves the resume alone.
    assert programs.main(['--config', path, 'watchdog'], run=fake.run) == 0
    assert [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c] == []
    assert len(requests.in_flight_resumes(config)) == 1
    age_heartbeat(config, requests.stale_after(config) + 1)
    assert programs.main(['--config', path, 'watchdog'], run=fake.run) == 0
    assert [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c] == [
        ['true', 'update', 'nodename=gpu-[1-2]', 'state=POWER_DOWN_FORCE', REASON]]
    assert fake.jobs[1]['state'] == 'PENDING' and requests.in_flight_resumes(config) == []
    line, = logged(config, 'resume gpu-[1-2] (request ')
    assert line.endswith('gpu-[1-2] handed back to Slurm (state=POWER_DOWN_FORCE)') and 'pid %d' % service.pid in line
    # A second run finds nothing left.
    assert programs.main(['--config', path, 'watchdog'], run=fake.run) == 0
    assert len([c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]) == 1
    assert programs.main(['--config', path, 'watchdog', 'gpu-1'], run=fake.run) == 2
