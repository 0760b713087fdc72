# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: mitogen_linear
short_description: Mitogen's linear strategy, with the processes placed on CPUs by the kernel
description:
  - An optional speed-up for C(configure.yml) and the other playbooks. Ansible starts a Python process
    on the host for every task; the L(Mitogen,https://mitogen.networkgenomics.com/ansible_detailed.html)
    library keeps one per host (and per become user) for a whole play, so a task costs less. The
    roles do the same work. Turn it on with C(ANSIBLE_STRATEGY=ocigpu.cluster.mitogen_linear) after
    C(pip install mitogen); docs/playbooks.md has the figures measured with it.
  - The on-demand nodes' pull (the slurm_autoscaler role's C(ocigpu-pull)) installs Mitogen beside ansible-core
    and runs its playbooks against the node with this strategy unless C(slurm_autoscaler_pull_mitogen) is empty.
  - This plugin is Mitogen's own C(mitogen_linear) strategy with five changes, the reason it exists.
    Mitogen pins its processes to CPUs itself; on a controller with two or three CPUs it keeps CPU 0
    for its connection multiplexer and pins every worker, and every process a worker starts (ssh
    among them), to CPU 1, so one CPU does all the work. Here Mitogen's placement is swapped for its
    base policy, which places nothing, so the kernel spreads the processes over every CPU. The
    plugin also spares you from looking up where pip put Mitogen's strategy plugins.
  - The second change is for the host keys. With Ansible's C(host_key_checking) on (its default),
    Mitogen puts C(-o StrictHostKeyChecking yes) in front of the host's own ssh arguments, and ssh keeps
    the first value it reads, so the C(StrictHostKeyChecking=accept-new) that the C(gpu_nodes) inventory
    and C(provision.yml) give every host was never read, and a host whose key was not yet known was
    refused. Where the host's ssh arguments name a C(StrictHostKeyChecking), this plugin leaves Mitogen's
    out, as Ansible's own ssh connection adds none. With C(host_key_checking) off nothing changes.
  - The third saves a process per skipped task. Ansible forks a worker process for every task and host,
    also one that only finds the task's C(when) false; this plugin evaluates such a condition in the
    controller's own process, as the worker would (the same variables, the connection's magic variables
    among them), and hands Ansible the worker's result (C(skipped), C(skip_reason), C(false_condition);
    censored under C(no_log)). The callbacks, counts and registered variables are the same. A task with a
    loop (its condition is per item), a delegated task, an include, a meta task, and a condition that is
    true, fails or warns are not skipped so; Ansible's TaskExecutor decides them, in a worker or, under
    the fourth and fifth changes, in this process. The hosts' conditions are so evaluated one host after the
    other in that process, as Ansible already works out each host's variables there; a condition that
    calls a slow lookup (a C(pipe) of a long command) costs the play its length once per host, where
    workers would run it side by side (C(forks)). On the test machine a skipped task cost 26-28 ms with
    Ansible's and Mitogen's strategies and 4 ms with this one (tests/perf/skip_bench.sh); in a joining node's
    pull, 15-21 ms against 36-41 ms in the play of the roles (53 skipped tasks), where Ansible's own
    per-task work (its variables) remains.
  - The fourth saves a process per task that works on variables alone. ansible-core's C(set_fact),
    C(assert), C(debug), C(fail), C(include_vars), C(validate_argument_spec), C(include_tasks) and
    C(include_role), written with their full names (a short name may be a playbook's own plugin), neither
    connect to the host nor run a module there; this plugin runs such a task in the controller's own
    process with Ansible's TaskExecutor, on copies of the task and its variables as a worker would have,
    and hands Ansible its result. The same tasks with a loop, retries (C(until)), C(async), a
    C(timeout) or C(delegate_to) still go to a worker. A lookup in such a task's arguments runs in
    the controller's process, one host after the other, as a condition's does. On the test machine a
    C(set_fact) cost 21-25 ms with Ansible's and Mitogen's strategies and 4 ms with this one
    (tests/perf/skip_bench.sh).
  - On a play's only host (its hosts after C(--limit); a C(serial) play's batches are not looked at),
    reached through a connection that Mitogen takes over (C(local), C(ssh) and the others of its
    list), every task runs so, modules too; Mitogen's connection is then made from the controller's
    process, as it is for a C(meta) task. With one host there is nothing for workers to do side by
    side; a node's pull is such a play. Still in a worker are a task with C(async), a C(timeout) or
    C(delegate_to), and C(pause), C(reboot) and C(wait_for_connection), which ask the terminal or
    restart the connection. A node's join on a baked image took 7.2 s of processor time against 11.4 s
    before this and the fourth change (tests/perf/join_bench.sh, one run after the other).
  - It uses ansible-core 2.19's own classes; with another release every task goes to a worker, as in
    Mitogen's strategy.
  - The boot wait (C(boot_wait.yml), the first play of C(configure.yml)), C(validate.yml) and the plays
    with background jobs (provisioning, teardown, the diagnostics bundle) keep Ansible's default
    strategy whatever is set here.
author:
  - ocigpu.cluster maintainers (@ocigpu)
version_added: 0.4.0
requirements:
  - mitogen (tested with 0.3.54)
"""

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins import loader as plugin_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

try:  # ansible-core 2.19's own classes: the skip and the run in the controller (RunHereMixin) need them.
    from ansible._internal import _display_utils, _task
    from ansible._internal._templating._engine import TemplateEngine
    from ansible.executor.task_executor import TaskExecutor
    from ansible.executor.task_result import _RawTaskResult
except ImportError:  # another ansible-core: every task goes to a worker, as in Mitogen's own strategy.
    _RawTaskResult = None

# Actions that work in the controller alone, on variables: ansible-core's own plugins, none of which
# connects to the host or runs a module there (each says so with _requires_connection = False); an
# include is worked out by the strategy, its worker only hands the include back. By their full names
# only: a short name may be a playbook's own action plugin of that name.
_HERE_ACTIONS = frozenset('ansible.builtin.' + name for name in (
    'assert', 'debug', 'fail', 'include_role', 'include_tasks', 'include_vars', 'set_fact', 'validate_argument_spec'))
# Actions that always get a worker, also on a play's only host: they restart the connection (a Mitogen
# connection made in this process would be torn down under it) or ask the terminal.
_WORKER_ACTIONS = frozenset(name for action in ('pause', 'reboot', 'wait_for_connection')
                            for name in (action, 'ansible.builtin.' + action, 'ansible.legacy.' + action))

try:
    import ansible_mitogen.affinity
    import ansible_mitogen.strategy
except ImportError as exc:  # Mitogen is optional: the error says how to get it when the plugin is used.
    MITOGEN_IMPORT_ERROR = exc
else:
    MITOGEN_IMPORT_ERROR = None
    # Read by the multiplexer, the top-level process and each worker as they start, all after this.
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

    import re

    import mitogen.ssh

    _STRICT_OPTION = re.compile(r'^(-o\s*)?StrictHostKeyChecking\b', re.IGNORECASE)
    _mitogen_boot_command = mitogen.ssh.Connection.get_boot_command

    def _boot_command_keeping_the_hosts_check(self):
        """Mitogen's ssh command line, less its own StrictHostKeyChecking=yes where the host's ssh
        arguments choose one (as Ansible's ssh connection leaves ssh's checks to them)."""
        bits = _mitogen_boot_command(self)
        if self.options.check_host_keys == 'enforce' and any(_STRICT_OPTION.match(arg) for arg in self.options.ssh_args or ()):
            for i in range(len(bits) - 1):
                if bits[i] == '-o' and bits[i + 1] == 'StrictHostKeyChecking yes':
                    del bits[i:i + 2]
                    break
        return bits

    # In the multiplexer, which starts the ssh processes: it is forked from this process after this.
    mitogen.ssh.Connection.get_boot_command = _boot_command_keeping_the_hosts_check


class RunHereMixin:
    """Tasks done here, in the controller's own process, with no worker process forked for them.

    Ansible forks a worker for every task and host; on the test machines that is most of a short task's
    cost (about 25 ms of its 30-40). Two kinds are done here instead. A task whose condition is false
    on a host is skipped with the worker's evaluation of the condition (the task's variables and the
    connection's magic variables, as the worker's TaskExecutor adds them) and the worker's result
    (``skipped``, ``skip_reason``, ``false_condition``); a task with a loop (its condition is per item), a
    delegated one, an include, a meta task, a condition that raises, warns or is true is not skipped so.
    And a task that _runs_here allows is run by Ansible's own TaskExecutor in this process, on copies of
    the task and its variables, as a worker would. Either way the result goes through the same queue, so
    the callbacks and the counts are those a worker would give."""

    def _queue_task(self, host, task, task_vars, play_context):
        if _RawTaskResult is None:
            return super()._queue_task(host, task, task_vars, play_context)
        result = _skip_result(self._loader, host, task, task_vars, play_context)
        here = None
        if result is None:
            if not _runs_here(task, self._alone_through_mitogen(task_vars, play_context)):
                return super()._queue_task(host, task, task_vars, play_context)
            # TaskExecutor post-validates its task and adds to its variables in place; a worker's are
            # its own copies, as these.
            here = task.copy(exclude_tasks=True)
        # As the base class does for a worker: the entry first (the results thread reads it), then the
        # callback, the result and the count of results to wait for.
        self._queued_task_cache[(host.name, task._uuid)] = {
            'host': host, 'task': task, 'task_vars': task_vars, 'play_context': play_context}
        self._tqm.send_callback('v2_runner_on_start', host, task)
        if here is not None:
            with _task.TaskContext(here):
                result = TaskExecutor(host, here, dict(task_vars), play_context, self._loader,
                                      plugin_loader.get_plugin_loader_namespace(), self._final_q,
                                      self._variable_manager).run()
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result,
                                                      task_fields=(here or task).dump_attrs()))
        self._pending_results += 1
        return None

    def _alone_through_mitogen(self, task_vars, play_context):
        """Whether the play runs on one host (after --limit; a serial play's batches are not looked at),
        reached through one of the connections that Mitogen takes over."""
        connection = task_vars.get('ansible_connection') or play_context.connection
        return len(self._hosts_cache) == 1 and connection in ansible_mitogen.strategy.REDIRECTED_CONNECTION_PLUGINS


def _runs_here(task, alone):
    """Whether task runs in this process: on a play's only host (alone), any task but those that restart
    the connection or ask the terminal; elsewhere ansible-core's actions on variables alone, once (no loop,
    no retries). Never one in the background, delegated, or with a timer (a task's timeout is an alarm
    signal, which would be the controller's own)."""
    if task.async_val or task.delegate_to or task.timeout:
        return False
    if alone:
        return task.action not in _WORKER_ACTIONS
    return task.action in _HERE_ACTIONS and not (task.loop or task.loop_with or task.until)


def _skip_result(loader, host, task, task_vars, play_context):
    """The worker's result for a task skipped on host, or None where a worker must decide."""
    if not task.when or task.loop or task.loop_with or task.delegate_to \
            or task.action in C._ACTION_ALL_INCLUDE_ROLE_TASKS or task.action in C._ACTION_META:
        return None
    variables = dict(task_vars)
    # What TaskExecutor.run adds before the condition (its loop lookup, also without a loop).
    search_path = task.get_search_path()
    if loader.get_basedir() not in search_path:
        search_path.append(loader.get_basedir())
    variables['ansible_search_path'] = search_path
    templar = TemplateEngine(loader=loader, variables=variables)
    context = {}
    try:
        with _display_utils.DeferredWarningContext(variables=variables) as warnings:
            # The connection's magic variables, as TaskExecutor._execute_internal adds them.
            task_context = play_context.set_task_and_variable_override(task=task, variables=variables, templar=templar)
            task_context.post_validate(templar=templar)
            if not task_context.remote_addr:
                task_context.remote_addr = host.address
            task_context.update_vars(variables)
            passed = task._resolve_conditional(task.when, variables, result_context=context)
    except Exception:  # pylint: disable=broad-except  # the worker raises it, where it is reported
        return None
    if passed or warnings.get_warnings() or warnings.get_deprecation_warnings():
        return None
    result = dict(changed=False, skipped=True, skip_reason='Conditional result was False')
    result.update(context)
    task.update_result_no_log(templar, result)
    return result


if MITOGEN_IMPORT_ERROR is None:
    class StrategyModule(RunHereMixin, ansible_mitogen.strategy.StrategyMixin, LinearStrategyModule):
        """Mitogen's linear strategy; the kernel places the processes; false conditions skipped here."""
else:
    class StrategyModule(LinearStrategyModule):  # type: ignore[no-redef]
        """Stands in for the strategy when Mitogen is missing, and says so."""

        def __init__(self, *args, **kwargs):
            raise AnsibleError('The ocigpu.cluster.mitogen_linear strategy needs the mitogen Python package on the '
                               'controller (pip install mitogen; tested with 0.3.54): %s' % MITOGEN_IMPORT_ERROR)
