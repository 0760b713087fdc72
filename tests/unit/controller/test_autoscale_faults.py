# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The autoscaler under faults, against the simulator: out of host capacity, nodes that never register,
a controller that dies in the middle of a resume, a suspend that overlaps a resume, and an API that
answers 429 and 5xx. Each test ends with nothing billable of the cluster left and checks the line of
the autoscaler's log that tells a person what happened."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from ocigpu_control import scaler as _autoscale
from ocigpu_control import programs as _autoscale_cli
from ocigpu_control import requests
from tests.unit.controller.slurmctld import Slurm
# The same simulator, configuration and autoscaler as the plain autoscaler tests.
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    SHAPE, config, gpu_instances, live, scaler, sim)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCONTROL = '/usr/bin/scontrol'


def program_config(tmp_path, config, **changes):  # pylint: disable=redefined-outer-name
    """The configuration file of the installed program."""
    data = dict((k, v) for k, v in config.items() if k != 'node_names')
    data.update(dict(scontrol=SCONTROL), **changes)
    path = tmp_path / 'autoscaler.json'
    path.write_text(json.dumps(data))
    return str(path)


def log_lines(config):  # pylint: disable=redefined-outer-name
    with open(config['log_file']) as f:
        return [line.rstrip('\n').split(' ', 4)[-1] for line in f]  # without date, time, pid and level


def logged(config, text):  # pylint: disable=redefined-outer-name
    """The log lines that contain text (at least one, or the assertion names them all)."""
    found = [line for line in log_lines(config) if text in line]
    assert found, 'no log line contains %r:\n%s' % (text, '\n'.join(log_lines(config)))
    return found


def nothing_billable(sim):  # pylint: disable=redefined-outer-name
    assert live(sim, 'cluster_networks') == [] and gpu_instances(sim) == []
    return True


def kill_while_provisioning(sim, path, *args):  # pylint: disable=redefined-outer-name
    """Run the installed program with args in its own process and kill it (SIGKILL) once the cluster
    network it creates is PROVISIONING; returns that cluster network's id. The program's waiter sleeps
    in real time and the simulator's clock stands still, so the cluster network stays PROVISIONING."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, '.build', 'collections'),
                                                       os.path.join(ROOT, 'controller')]))
    program = 'import sys; from ocigpu_control import programs; sys.exit(programs.main(sys.argv[1:]))'
    proc = subprocess.Popen([sys.executable, '-c', program, '--config', path] + list(args), env=env,  # pylint: disable=consider-using-with
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not live(sim, 'cluster_networks') and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [c['lifecycleState'] for c in live(sim, 'cluster_networks')] == ['PROVISIONING'], proc.poll()
    finally:
        proc.kill()
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode == -9, output
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    return cn_id


# (a) Out of host capacity ------------------------------------------------------------------------

def test_out_of_host_capacity_hands_the_nodes_back_and_a_later_resume_succeeds(sim, tmp_path, config):
    slurm = Slurm(program_config(tmp_path, config))
    sim.capacity.set(SHAPE, 1)
    assert slurm('resume', 'gpu-[1-2]') == 1
    reason = 'reason=ocigpu-autoscaler: cluster network as-gpu-1-2 for gpu-[1-2] failed: Out of host capacity.'
    assert slurm.commands == [[SCONTROL, 'update', 'nodename=gpu-[1-2]', 'state=POWER_DOWN_FORCE', reason]]
    assert nothing_billable(sim)
    failed_id = [c['id'] for c in sim.state.find('cluster_networks', displayName='as-gpu-1-2')][0]
    line, = logged(config, 'resume gpu-[1-2] failed')
    assert line == ('resume gpu-[1-2] failed: cluster network as-gpu-1-2 for gpu-[1-2] failed: Out of host capacity.; '
                    'cluster network %s terminated, nothing of gpu-[1-2] is left running; '
                    'gpu-[1-2] handed back to Slurm powered down (state=POWER_DOWN_FORCE)' % failed_id)

    # Slurm requeues the job and resumes the same nodes later; the hosts are there by then.
    sim.capacity.set(SHAPE, None)
    slurm.commands.clear()
    assert slurm('resume', 'gpu-[1-2]') == 0
    assert slurm.addresses() == ['nodename=gpu-1', 'nodename=gpu-2'] and slurm.power_downs() == []
    running = live(sim, 'cluster_networks')
    assert [c['lifecycleState'] for c in running] == ['RUNNING'] and running[0]['id'] != failed_id
    assert sim.calls['POST /clusterNetworks'] == 2 and len(gpu_instances(sim)) == 2
    logged(config, 'resume gpu-[1-2]: cluster network %s RUNNING' % running[0]['id'])

    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)
    assert _autoscale.StateFile(config['state_file']).read()['released'] == []


# (b) Nodes that never register with slurmctld ------------------------------------------------------

def test_resume_fail_terminates_the_cluster_network_of_nodes_that_never_registered(sim, tmp_path, config):
    slurm = Slurm(program_config(tmp_path, config))
    assert slurm('resume', 'gpu-[1-2]') == 0
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    # The instances run, but slurmd never registers (a broken image, say): after ResumeTimeout slurmctld
    # sets the nodes DOWN, requeues the job and calls the ResumeFailProgram with them.
    assert slurm('resume-fail', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)
    assert logged(config, 'resume-fail gpu-[1-2]: cluster network') == [
        'resume-fail gpu-[1-2]: cluster network %s (as-gpu-1-2) terminated: all its nodes (gpu-[1-2]) are released' % cn_id]
    assert slurm.power_downs() == []  # slurmctld has set them DOWN itself
    assert _autoscale.StateFile(config['state_file']).read()['released'] == []


def test_resume_fail_of_some_nodes_keeps_the_cluster_network_for_the_others(sim, tmp_path, config):
    slurm = Slurm(program_config(tmp_path, config))
    assert slurm('resume', 'gpu-[1-3]') == 0
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    assert slurm('resume-fail', 'gpu-3') == 0
    # gpu-1 and gpu-2 registered and may be running jobs: their cluster network stays, gpu-3's node with it.
    assert len(gpu_instances(sim)) == 3
    assert logged(config, 'resume-fail gpu-3: cluster network') == [
        'resume-fail gpu-3: cluster network %s (as-gpu-1-3) keeps running for gpu-[1-2]' % cn_id]
    # Once they are idle for SuspendTime, the suspend of the rest ends it.
    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)
    logged(config, 'suspend gpu-[1-2]: cluster network %s (as-gpu-1-3) terminated: all its nodes (gpu-[1-3]) are released'
           % cn_id)


# (c) The controller restarts in the middle of a resume ---------------------------------------------

def test_resume_after_the_controller_died_mid_resume_adopts_the_cluster_network(sim, tmp_path, config):
    path = program_config(tmp_path, config, scontrol='true')
    requests.beat(config, time.time())
    assert _autoscale_cli.main(['--config', path, 'resume', 'gpu-[1-2]']) == 0
    cn_id = kill_while_provisioning(sim, path, 'service')
    logged(config, 'resume gpu-[1-2]: creating cluster network as-gpu-1-2 with 2 node(s) for gpu-[1-2]')

    # slurmctld, restarted, finds the nodes still powering up and resumes them again.
    slurm = Slurm(path)
    assert slurm('resume', 'gpu-[1-2]') == 0
    assert slurm.addresses() == ['nodename=gpu-1', 'nodename=gpu-2']
    assert sim.calls['POST /clusterNetworks'] == 1
    assert [(c['id'], c['lifecycleState']) for c in live(sim, 'cluster_networks')] == [(cn_id, 'RUNNING')]
    assert len(gpu_instances(sim)) == 2
    logged(config, 'resume gpu-[1-2]: adopting cluster network %s (PROVISIONING, gpu-[1-2]) for gpu-[1-2]' % cn_id)

    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)


def test_resume_that_times_out_leaves_the_cluster_network_to_the_next_resume(sim, tmp_path, config):
    """A wait past wait_timeout (the create takes 120 simulated seconds here) hands the nodes back but
    leaves the cluster network: the next resume adopts it, or the suspend that Slurm's power down runs
    terminates it."""
    slurm = Slurm(program_config(tmp_path, config, wait_timeout=60))
    assert slurm('resume', 'gpu-[1-2]') == 1
    assert [c[2] for c in slurm.power_downs()] == ['nodename=gpu-[1-2]']
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    line, = logged(config, 'resume gpu-[1-2] failed')
    assert line.startswith('resume gpu-[1-2] failed: cluster network as-gpu-1-2 for gpu-[1-2]: timed out after 60s')
    assert line.endswith('; what was made is left for a later resume to adopt or a suspend to terminate; '
                         'gpu-[1-2] handed back to Slurm powered down (state=POWER_DOWN_FORCE)')

    slurm = Slurm(program_config(tmp_path, config))
    assert slurm('resume', 'gpu-[1-2]') == 0 and slurm.addresses() == ['nodename=gpu-1', 'nodename=gpu-2']
    assert sim.calls['POST /clusterNetworks'] == 1 and [c['id'] for c in live(sim, 'cluster_networks')] == [cn_id]
    logged(config, 'resume gpu-[1-2]: adopting cluster network %s' % cn_id)
    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)


# (d) A suspend that overlaps a resume --------------------------------------------------------------

class Pause(object):
    """Stops a resume at one point until the test lets it go on."""

    def __init__(self):
        self.reached = threading.Event()
        self.go = threading.Event()

    def wrap(self, fn):
        def paused(*args, **kwargs):
            self.reached.set()
            assert self.go.wait(60), 'the test never let the resume go on'
            return fn(*args, **kwargs)
        return paused


def in_thread(fn, *args):
    result = {}

    def target():
        result['value'] = fn(*args)
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def test_suspend_while_resume_waits_for_provisioning(sim, tmp_path, config):
    pause = Pause()

    def paused_in_the_wait(conf):
        scaler_ = _autoscale.Autoscaler(conf)
        scaler_.listings.wait_for = pause.wrap(scaler_.listings.wait_for)
        return scaler_
    resumer = Slurm(program_config(tmp_path, config), factory=paused_in_the_wait)
    thread, resumed = in_thread(resumer, 'resume', 'gpu-[1-2]')
    assert pause.reached.wait(60)
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    assert sim.state.get(cn_id)['lifecycleState'] == 'PROVISIONING'

    # The job is cancelled and slurmctld powers its nodes down while the resume still waits.
    suspender = Slurm(resumer.path)
    assert suspender('suspend', 'gpu-[1-2]') == 0
    pause.go.set()
    thread.join(60)
    assert not thread.is_alive()

    assert resumed['value'] == 1 and resumer.addresses() == []
    assert [c[2] for c in resumer.power_downs()] == ['nodename=gpu-[1-2]']
    assert nothing_billable(sim) and sim.calls['POST /clusterNetworks'] == 1
    assert _autoscale.StateFile(config['state_file']).read()['released'] == []
    logged(config, 'suspend gpu-[1-2]: cluster network %s (as-gpu-1-2) terminated: all its nodes (gpu-[1-2]) are released'
           % cn_id)
    logged(config, 'resume gpu-[1-2]: cluster network %s was terminated while it was being created '
                   '(a suspend or resume-fail of its nodes, or by hand)' % cn_id)


def test_suspend_before_the_resume_creates_its_cluster_network(sim, tmp_path, config):
    """The suspend runs to its end after the resume took the names back and before it created anything:
    it finds no cluster network, so the resume must not leave the one it then makes running."""
    pause = Pause()

    def paused_before_the_create(conf):
        scaler_ = _autoscale.Autoscaler(conf)
        scaler_.ops.create = pause.wrap(scaler_.ops.create)
        return scaler_
    resumer = Slurm(program_config(tmp_path, config), factory=paused_before_the_create)
    thread, resumed = in_thread(resumer, 'resume', 'gpu-[1-2]')
    assert pause.reached.wait(60)
    assert live(sim, 'cluster_networks') == []
    suspender = Slurm(resumer.path)
    assert suspender('suspend', 'gpu-[1-2]') == 0
    pause.go.set()
    thread.join(60)
    assert not thread.is_alive()

    assert resumed['value'] == 1 and resumer.addresses() == []
    assert [c[2] for c in resumer.power_downs()] == ['nodename=gpu-[1-2]']
    assert nothing_billable(sim) and sim.calls['POST /clusterNetworks'] == 1
    cn_id, = [c['id'] for c in sim.state.find('cluster_networks', displayName='as-gpu-1-2')]
    assert _autoscale.StateFile(config['state_file']).read()['released'] == []
    logged(config, 'suspend gpu-[1-2]: no cluster network carries gpu-[1-2]')
    logged(config, 'resume gpu-[1-2]: gpu-[1-2] suspended while being resumed; cluster network %s (as-gpu-1-2) terminated'
           % cn_id)


def test_suspend_of_some_nodes_while_resume_waits_leaves_the_rest_up(sim, tmp_path, config):
    pause = Pause()

    def paused_in_the_wait(conf):
        scaler_ = _autoscale.Autoscaler(conf)
        scaler_.listings.wait_for = pause.wrap(scaler_.listings.wait_for)
        return scaler_
    resumer = Slurm(program_config(tmp_path, config), factory=paused_in_the_wait)
    thread, resumed = in_thread(resumer, 'resume', 'gpu-[1-2]')
    assert pause.reached.wait(60)
    assert Slurm(resumer.path)('suspend', 'gpu-1') == 0
    pause.go.set()
    thread.join(60)

    # gpu-2 is still wanted: it comes up; gpu-1 is Slurm's no more and gets no address.
    assert resumed['value'] == 0 and resumer.addresses() == ['nodename=gpu-2'] and resumer.power_downs() == []
    assert len(gpu_instances(sim)) == 2 and _autoscale.StateFile(config['state_file']).read()['released'] == ['gpu-1']
    logged(config, 'resume gpu-[1-2]: gpu-1 suspended while being resumed; cluster network')
    assert Slurm(resumer.path)('suspend', 'gpu-2') == 0
    assert nothing_billable(sim)


# (e) Throttling and server errors ------------------------------------------------------------------

def test_resume_rides_out_429_and_5xx(sim, tmp_path, config):
    slurm = Slurm(program_config(tmp_path, config))
    rules = [
        sim.faults.error(502, route='GET /clusterNetworks', count=2),  # the first look for one
        sim.faults.error(500, route='POST /clusterNetworks', count=1, after=True),  # made, but the answer is lost
        sim.faults.error(503, route='GET /vnicAttachments', count=3),
        sim.faults.error(504, route='GET /privateIps', count=1),
        sim.faults.throttle(route='GET /clusterNetworks/{clusterNetworkId}/instances', count=2),
        sim.faults.throttle(route='PUT /instances/{instanceId}', count=2),
    ]
    assert slurm('resume', 'gpu-[1-2]') == 0
    assert [r.fired for r in rules] == [2, 1, 3, 1, 2, 2]
    assert slurm.addresses() == ['nodename=gpu-1', 'nodename=gpu-2'] and slurm.power_downs() == []
    # The lost answer was retried with the same opc-retry-token: one cluster network, two nodes.
    assert sim.calls['POST /clusterNetworks'] == 2
    assert [c['lifecycleState'] for c in live(sim, 'cluster_networks')] == ['RUNNING'] and len(gpu_instances(sim)) == 2
    # every fault was answered by a retry, and the log counts them
    logged(config, 'resume gpu-[1-2]: %d OCI API call(s) retried meanwhile (throttling, server errors or lost answers)'
           % sum(r.fired for r in rules))

    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert nothing_billable(sim)


def test_resume_whose_cluster_network_cannot_be_read_leaves_nothing_behind(sim, tmp_path, config):
    """The create worked, but the listing of cluster networks its wait reads answers 503 until the retries
    (8 attempts) are spent; the next listing, which looks for what was made, is answered."""
    def failing_in_the_wait(conf):
        scaler_ = _autoscale.Autoscaler(conf)
        wait_for = scaler_.listings.wait_for

        def failing(*args, **kwargs):
            if not rules:  # the wait for RUNNING; the wait for its termination is answered
                rules.append(sim.faults.error(503, route='GET /clusterNetworks', count=8))
            return wait_for(*args, **kwargs)
        scaler_.listings.wait_for = failing
        return scaler_
    rules = []
    slurm = Slurm(program_config(tmp_path, config), factory=failing_in_the_wait)
    assert slurm('resume', 'gpu-[1-2]') == 1 and rules[0].fired == 8
    sim.faults.clear()
    assert [c[2] for c in slurm.power_downs()] == ['nodename=gpu-[1-2]'] and slurm.addresses() == []
    assert nothing_billable(sim)
    made, = sim.state.find('cluster_networks', displayName='as-gpu-1-2')
    line, = logged(config, 'resume gpu-[1-2] failed')
    assert line == ('resume gpu-[1-2] failed: cluster network as-gpu-1-2 for gpu-[1-2] failed: OCI API error 503 '
                    'ServiceUnavailable: The service is currently unavailable.; cluster network %s terminated, '
                    'nothing of gpu-[1-2] is left running; gpu-[1-2] handed back to Slurm powered down (state=POWER_DOWN_FORCE)'
                    % made['id'])


def test_resume_whose_create_answer_never_arrives_leaves_nothing_behind(sim, tmp_path, config):
    """The create is made but its answer is lost, and every retry is refused: the autoscaler never learns
    the cluster network's id and must find it by its tags."""
    lost = sim.faults.error(500, route='POST /clusterNetworks', count=1, after=True)
    refused = []

    def refuse_the_retries(event, _instance, _vnics):  # runs while the first create is being made
        if event == 'launch' and not refused:
            refused.append(sim.faults.error(503, route='POST /clusterNetworks'))
    sim.on_instance(refuse_the_retries)
    slurm = Slurm(program_config(tmp_path, config))
    assert slurm('resume', 'gpu-[1-2]') == 1
    sim.faults.clear()
    assert lost.fired == 1 and refused[0].fired == 7 and sim.calls['POST /clusterNetworks'] == 8  # api_retries
    assert [c[2] for c in slurm.power_downs()] == ['nodename=gpu-[1-2]'] and slurm.addresses() == []
    assert nothing_billable(sim)
    made, = sim.state.find('cluster_networks', displayName='as-gpu-1-2')
    line, = logged(config, 'resume gpu-[1-2] failed')
    assert line == ('resume gpu-[1-2] failed: cluster network as-gpu-1-2 for gpu-[1-2] failed: OCI API error 503 '
                    'ServiceUnavailable: The service is currently unavailable.; cluster network %s terminated, '
                    'nothing of gpu-[1-2] is left running; gpu-[1-2] handed back to Slurm powered down (state=POWER_DOWN_FORCE)'
                    % made['id'])
