# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The pull path: a GPU node that configures itself at boot (`ocigpu-pull`).

The collection's cloud-init (user_data, rendered by provision.yml) installs this file as
/usr/local/sbin/ocigpu-pull and starts it as a systemd service. It uses the Python standard library
only, so that it runs on a bare image, and carries no secret: everything that is not public comes
from the controller over an authenticated channel.

1. Waits until the instance metadata service shows the instance's freeform tags
   ``ocigpu-slurm-node`` (its Slurm name), ``ocigpu-pull-server`` (the controller's private
   address and port) and ``ocigpu-pull-cert`` (the SHA-256 of the controller's TLS certificate).
   The controller's resume program sets them once the cluster network is RUNNING; a node without
   them (a static node that configure.yml builds by push) gives up after ``--wait`` seconds.
   Then it waits for cloud-init to finish (``cloud-init status --wait``; configure.yml's boot wait,
   which would wait for SSH to the node itself, is skipped).
2. Connects to the controller over TLS, pinned to that certificate, and fetches the bundle: the
   collections (ocigpu.cluster and what it depends on) and the cluster's node settings.
3. Asks to join. The controller checks with the OCI API that the caller's address belongs to a
   running instance of the cluster that carries this Slurm name, then answers with the munge key,
   the cluster's MPI key pair and slurmctld's address (the only secrets, over the pinned channel,
   kept in a root-only file for the run and removed after it).
4. Makes a virtual environment with ansible-core and runs ``ocigpu.cluster.configure`` against
   itself (connection local), in the group gpu_nodes under its Slurm name: the same roles as a
   push from the operator. Then it runs the node's passive health checks (``ocigpu-healthcheck
   --no-slurm``) and, where the bundle's settings ask (``active_check``: on with the self-healing
   loop), the active NCCL check (``ocigpu.cluster.validate --tags health`` against itself, failing on
   a short run; on a current baked image it runs in the same ansible-playbook as the roles, before the
   passive checks); only when they pass does it start slurmd (configless, ``-N <name>``), so that
   slurmctld sends the node no job before every role is in place and the node is sound.
5. When the configure run or the checks fail (or slurmd does not start), it tells the controller
   (``POST /v1/failed``), which hands the node back to Slurm at once rather than at ResumeTimeout.

On a baked image (``--bake`` made it, /etc/ocigpu/baked.json says from which bundle), the pull checks
the bundle against it after fetching: another collection or lock file is refused (told to the
controller, nothing runs); the same one runs only the roles' per-node steps (``--tags node_join``);
the same one with other pull settings runs every step again.

Each step is logged with its time; the timings are written to <state>/pull.json for the
benchmarks. The exit status is 0 when the node joined or is not an on-demand node (it never got
its tags); either way a marker in the state folder keeps the next boot from pulling again.
"""

from __future__ import absolute_import, division, print_function

import argparse
import errno
import functools
import glob
import hashlib
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time

try:
    import http.client as httplib
    from urllib.request import Request, urlopen
except ImportError:  # pragma: no cover - Python 2 is not a target
    httplib = None

IMDS_URL = 'http://169.254.169.254/opc/v2'
NODE_TAG = 'ocigpu-slurm-node'
# A static node's new instance, from the self-healing loop: its Slurm name is the inventory's tag (it
# stays in gpu_nodes); with the pull server's tags, it pulls too.
STATIC_NAME_TAG = 'ocigpu-slurm-name'
SERVER_TAG = 'ocigpu-pull-server'
CERT_TAG = 'ocigpu-pull-cert'
EXIT_NO_TAGS = 3

DEFAULTS = dict(imds_url=IMDS_URL, wait=1800, poll=1, prefix='/opt/ocigpu-pull', state_dir='/var/lib/ocigpu-pull',
                log_file='/var/log/ocigpu-pull.log', timeout=60, manifest='/etc/ocigpu/baked.json', root='/')
# What a baked image holds (--bake): configure.yml's run of a GPU node's roles less their per-node steps,
# the tasks tagged JOIN_TAG; a node that boots from the image runs only those.
JOIN_TAG = 'node_join'
# configure.yml's wait for SSH and cloud-init (boot_wait.yml's play of that tag): the runs here are on the
# node itself, over no SSH; the pull waits for cloud-init itself (wait_for_cloud_init).
BOOT_WAIT_TAG = 'boot_wait'
# The active check's tag in validate.yml, and the first line its run prints: where a run of configure.yml
# and then validate.yml (one ansible-playbook, on a current baked image) passes from one to the other.
CHECK_TAG = 'health'
CHECK_PLAY_LINE = 'PLAY [Check that there are GPU nodes to validate]'
BAKE_PLAYBOOK = 'ocigpu.cluster.bake_node'
MANIFEST_FORMAT = 2


class PullError(Exception):
    pass


class Log(object):
    """Timestamped progress lines on stdout (the journal) and in the log file."""

    def __init__(self, path=None, clock=time.time):
        self.path = path
        self.clock = clock
        self.start = clock()

    def __call__(self, message, *args):
        text = message % args if args else message
        line = '%s +%5.1fs %s' % (time.strftime('%H:%M:%S'), self.clock() - self.start, text)
        print(line)
        sys.stdout.flush()
        if self.path:
            with open(self.path, 'a') as f:
                f.write(line + '\n')


# Instance metadata ----------------------------------------------------------------------------

def imds_instance(imds_url, timeout=5):
    req = Request(imds_url.rstrip('/') + '/instance/', headers={'Authorization': 'Bearer Oracle'})
    return json.loads(urlopen(req, timeout=timeout).read().decode('utf-8'))


def read_tags(doc):
    """(name, server, cert) from the instance document, or None while any is missing. The name is the
    on-demand node's tag, else a static node's (STATIC_NAME_TAG), which pulls only with the server's tags:
    a static node that provision.yml replaced carries its name but is configured by push."""
    tags = doc.get('freeformTags') or {}
    found = (tags.get(NODE_TAG) or tags.get(STATIC_NAME_TAG), tags.get(SERVER_TAG), tags.get(CERT_TAG))
    return found if all(found) else None


# The tags come within seconds of the launch on an on-demand node or a replacement (the service sets
# them): a look every `poll` seconds for the first minute, then every SLOW_POLL at most, as a node that
# waits longer (a static node, configured by push) needs no haste.
SLOW_POLL_AFTER, SLOW_POLL = 60, 5


def wait_for_tags(imds_url, wait, poll, log, fetch=imds_instance, sleep=time.sleep, clock=time.time):
    start = clock()
    deadline = start + wait
    said = None
    while True:
        try:
            doc = fetch(imds_url)
            found = read_tags(doc)
            if found:
                return found, doc
            state = 'tags %s not set yet' % ', '.join(k for k in (NODE_TAG, SERVER_TAG, CERT_TAG)
                                                      if not (doc.get('freeformTags') or {}).get(k))
        except (IOError, OSError, ValueError) as exc:
            state = 'metadata service not answering (%s)' % exc
        if state != said:
            log('waiting: %s', state)
            said = state
        now = clock()
        if now >= deadline:
            return None, None
        sleep(poll if now - start < SLOW_POLL_AFTER else max(poll, SLOW_POLL))


# The controller, over TLS pinned to its certificate ---------------------------------------------

def fingerprint(der):
    return hashlib.sha256(der).hexdigest()


class Controller(object):
    """HTTPS to the controller's pull server, accepting only the certificate whose SHA-256 is pinned."""

    def __init__(self, server, cert_sha256, timeout=60):
        host, _sep, port = server.rpartition(':')
        if not host or not port.isdigit():
            raise PullError('pull server %r is not host:port' % server)
        self.host, self.port = host.strip('[]'), int(port)
        self.pin = cert_sha256.lower().replace(':', '')
        self.timeout = timeout
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # The pin replaces the CA check: the certificate is self-signed by the controller.
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE

    def _connect(self, privileged=False):
        """A pinned connection; privileged: from a source port below 1024, which only root can bind
        (the controller hands the munge key to root on the node, not to any process on it)."""
        if not privileged:
            conn = httplib.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.context)
            conn.connect()
        else:
            conn = None
            for port in range(1023, 599, -1):
                conn = httplib.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.context,
                                               source_address=('', port))
                try:
                    conn.connect()
                    break
                except OSError as exc:
                    conn.close()
                    conn = None
                    if exc.errno == errno.EACCES:
                        raise PullError('joining needs root: the controller answers only a privileged source port')
                    if exc.errno != errno.EADDRINUSE:
                        raise
            if conn is None:
                raise PullError('no free privileged source port (600-1023) to join from')
        seen = fingerprint(conn.sock.getpeercert(binary_form=True))
        if seen != self.pin:
            conn.close()
            raise PullError('the controller at %s:%d shows certificate %s, not the pinned %s: refusing to talk to it'
                            % (self.host, self.port, seen, self.pin))
        return conn

    def request(self, method, path, body=None, out=None, privileged=False):
        conn = self._connect(privileged)
        try:
            headers = {'Content-Type': 'application/json'} if body is not None else {}
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                detail = resp.read().decode('utf-8', 'replace')
                try:
                    detail = json.loads(detail).get('error', detail)
                except ValueError:
                    pass
                raise PullError('%s %s: %d %s' % (method, path, resp.status, detail))
            if out is None:
                return json.loads(resp.read().decode('utf-8'))
            with open(out, 'wb') as f:
                shutil.copyfileobj(resp, f)
            return out
        finally:
            conn.close()


def retry(fn, attempts, delay, log, what, sleep=time.sleep):
    """Call fn until it succeeds; a controller that restarts or is not up yet is waited for."""
    for n in range(1, attempts + 1):
        try:
            return fn()
        except (IOError, OSError, socket.error, httplib.HTTPException) as exc:
            if n == attempts:
                raise PullError('%s: %s' % (what, exc))
            log('%s: %s; trying again in %ds (%d/%d)', what, exc, delay, n, attempts)
            sleep(delay)


def safe_extract(archive, dest):
    """Extract a tar.gz, refusing members that leave dest (absolute paths, '..', links out)."""
    root = os.path.realpath(dest)
    with tarfile.open(archive, 'r:gz') as tar:
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(root, member.name))
            if target != root and not target.startswith(root + os.sep):
                raise PullError('bundle member %r leaves %s' % (member.name, dest))
            if member.issym() or member.islnk():
                link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
                if not link.startswith(root + os.sep):
                    raise PullError('bundle link %r points outside %s' % (member.name, dest))
            if member.isdev():
                raise PullError('bundle member %r is a device' % member.name)
        if hasattr(tarfile, 'data_filter'):  # Python 3.12+ (and security releases before it)
            tar.extractall(root, filter='data')
        else:
            tar.extractall(root)


# Baked images -----------------------------------------------------------------------------------

def _sha256_file(path):
    digest = hashlib.sha256()
    try:
        with open(path, 'rb') as f:
            for block in iter(functools.partial(f.read, 1 << 20), b''):
                digest.update(block)
    except IOError as exc:
        if exc.errno != errno.ENOENT:
            raise
    return digest.hexdigest()


def _read_bytes(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except IOError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return b''


def bundle_digests(bundle_dir):
    """The four digests of an extracted bundle (the baked image's manifest, and its image tag):
    collection_digest over each file under collections/ ("path NUL sha256" lines, sorted; no
    __pycache__ or *.pyc), lock_digest of ocigpu.lock.yml, settings_digest of node-vars.yml NUL
    pull.json, bundle_digest of the three."""
    top = os.path.join(bundle_dir, 'collections')
    files = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        for name in names:
            if not name.endswith('.pyc'):
                path = os.path.join(folder, name)
                files.append((os.path.relpath(path, top).replace(os.sep, '/'), path))
    collection = hashlib.sha256()
    for rel, path in sorted(files):
        collection.update(('%s\0%s\n' % (rel, _sha256_file(path))).encode('utf-8'))
    found = dict(collection_digest=collection.hexdigest(),
                 lock_digest=_sha256_file(os.path.join(bundle_dir, 'ocigpu.lock.yml')),
                 settings_digest=hashlib.sha256(_read_bytes(os.path.join(bundle_dir, 'node-vars.yml')) + b'\0'
                                                + _read_bytes(os.path.join(bundle_dir, 'pull.json'))).hexdigest())
    found['bundle_digest'] = hashlib.sha256(' '.join(
        found[k] for k in ('collection_digest', 'lock_digest', 'settings_digest')).encode('ascii')).hexdigest()
    return found


def collection_label(settings):
    """'ocigpu.cluster x.y.z' from pull.json's collections."""
    for entry in settings.get('collections') or []:
        if str(entry).split(' ', 1)[0] == 'ocigpu.cluster':
            return str(entry)
    return 'ocigpu.cluster'


def baked_check(path, digests, settings):
    """What the pull does on this image: (None, None) without a manifest (not baked), ('refuse', message),
    ('full', manifest) when only the settings changed since the bake, ('skip', manifest) when it is current."""
    try:
        with open(path) as f:
            manifest = json.load(f)
    except IOError as exc:
        if exc.errno == errno.ENOENT:
            return None, None
        return 'refuse', 'baked image manifest %s unreadable (%s): give the node template the stock image' % (path, exc)
    except ValueError as exc:
        return 'refuse', 'baked image manifest %s unreadable (%s): give the node template the stock image' % (path, exc)
    if not isinstance(manifest, dict) or manifest.get('format') != MANIFEST_FORMAT:
        return 'refuse', ('baked image manifest %s is not format %d (an earlier collection baked it): re-bake '
                          '(ansible-playbook ocigpu.cluster.bake) or give the node template the stock image'
                          % (path, MANIFEST_FORMAT))
    if (manifest.get('collection_digest'), manifest.get('lock_digest')) != (digests['collection_digest'], digests['lock_digest']):
        theirs, ours = str(manifest.get('collection') or 'ocigpu.cluster'), collection_label(settings)
        if theirs == ours and manifest.get('collection_digest') != digests['collection_digest']:
            # Same version, other files (a development checkout): say which.
            theirs += ' files %s' % str(manifest.get('collection_digest'))[:12]
            ours += ' files %s' % digests['collection_digest'][:12]
        return 'refuse', ('baked image made for %s lock %s, this cluster serves %s lock %s: re-bake '
                          '(ansible-playbook ocigpu.cluster.bake) or give the node template the stock image'
                          % (theirs, str(manifest.get('lock_digest'))[:12], ours, digests['lock_digest'][:12]))
    if manifest.get('settings_digest') != digests['settings_digest']:
        return 'full', manifest
    return 'skip', manifest


# Ansible on the node ----------------------------------------------------------------------------

def find_python(candidates=('python3.13', 'python3.12', 'python3.11', 'python3'), minimum=(3, 11), run=subprocess.run):
    """The first interpreter new enough for ansible-core (as controller: 3.11 or newer) whose venv
    can bootstrap pip (Debian's python3 without python3-venv cannot)."""
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        probe = run([path, '-c', 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])'],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if probe.returncode == 0:
            version = tuple(int(x) for x in probe.stdout.decode().strip().split('.'))
            if version >= tuple(minimum):
                return path
    return None


# What brings a new enough Python with venv where the image has none: Oracle Linux 8/9 ship 3.6/3.9
# as python3 and python3.12 in AppStream; Debian and Ubuntu split venv's ensurepip into python3-venv.
PYTHON_PACKAGES = (('dnf', ['dnf', '-y', 'install', 'python3.12', 'python3.12-pip']),
                   ('apt-get', ['apt-get', 'install', '-y', '--no-install-recommends', 'python3-venv']))


def install_python(log, run=subprocess.run, which=shutil.which):
    for tool, argv in PYTHON_PACKAGES:
        if which(tool):
            log('ansible: no Python 3.11+ with venv; installing it: %s', ' '.join(argv))
            proc = run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0:
                log('ansible: %s failed: %s', ' '.join(argv), proc.stdout.decode('utf-8', 'replace')[-1000:])
            return proc.returncode == 0
    return False


def requirements(settings):
    """What the node's virtual environment holds: ansible-core, and Mitogen where the settings name it."""
    return [settings.get('ansible_core', 'ansible-core')] + ([settings['mitogen']] if settings.get('mitogen') else [])


def make_venv(prefix, settings, log, run=subprocess.run, find=find_python, install=install_python):
    venv = os.path.join(prefix, 'venv')
    python = os.path.join(venv, 'bin', 'python')
    want = ' '.join(requirements(settings))
    marker = os.path.join(venv, '.ocigpu-ansible-core')
    if os.path.exists(marker) and open(marker).read().strip() == want:
        log('ansible: %s already in %s', want, venv)
        return venv
    interpreter = find()
    if not interpreter and install(log):
        interpreter = find()
    if not interpreter:
        raise PullError('no Python 3.11 or newer with venv on this node (ansible-core needs one): '
                        'install python3.12 (EL) or python3.11 and python3.11-venv (Ubuntu)')
    log('ansible: installing %s into %s with %s', want, venv, interpreter)
    for argv in ([interpreter, '-m', 'venv', venv],
                 [python, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
                 + list(settings.get('pip_args') or []) + requirements(settings)):
        proc = run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise PullError('%s failed: %s' % (' '.join(argv[:4]), proc.stdout.decode('utf-8', 'replace')[-2000:]))
    with open(marker, 'w') as f:
        f.write(want + '\n')
    return venv


def write_private(path, data):
    """A root-only file (the munge key and the MPI key travel in it to the configure run)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        json.dump(data, f)


def join_vars(answer, name):
    """The configure run's extra vars from the join answer: the munge key and slurmctld's address for the
    slurm role, and the MPI key pairs ({user: {private, public}}, one per user) for the mpi_ssh role (without
    them, that role is left out)."""
    found = dict(slurm_munge_key_b64=answer['munge_key_b64'], slurm_conf_server=answer['conf_server'],
                 slurm_node_name=name)
    if answer.get('mpi_keys'):
        found['mpi_ssh_keys'] = answer['mpi_keys']
    else:
        found['configure_mpi_ssh'] = False
    return found


def playbook_command(venv, bundle, playbooks, options, extra_files):
    """ansible-playbook from the node's virtual environment against the bundle's one-host inventory, with one
    playbook or a list of them (run one after the other, with the same options)."""
    playbooks = [playbooks] if isinstance(playbooks, str) else list(playbooks)
    argv = [os.path.join(venv, 'bin', 'ansible-playbook')] + playbooks + ['-i', os.path.join(bundle, 'inventory.ini')]
    argv += list(options)
    for path in extra_files:
        argv += ['-e', '@' + path]
    return argv


def skip_tags_option(settings, *first):
    """--skip-tags with the tags given first, then those the bundle's settings skip; [] when none."""
    tags = list(first) + [tag for tag in settings.get('skip_tags') or [] if tag not in first]
    return ['--skip-tags', ','.join(tags)] if tags else []


def _check_options(strategy):
    return ['-e', 'nccl_tests_fail_on_gate=true', '-e', 'validate_health_strategy=' + strategy]


def configure_command(venv, bundle, name, settings, extra_files, join_only=False, check_strategy=None):
    """configure.yml against this node, less its boot wait; on a current baked image (join_only) its
    per-node steps alone. With check_strategy (on a current baked image only), the active check's playbook
    runs in the same ansible-playbook right after it (``--tags node_join,health``): one start of Ansible and
    one read of the node instead of two. The tags pick the same tasks as the two runs would (neither
    playbook has a task of the other's tag; tests/unit/controller/test_pull_tasks.py compares the lists)."""
    configure = settings.get('playbook', 'ocigpu.cluster.configure')
    if not (join_only and check_strategy):
        options = (['--tags', JOIN_TAG] if join_only else []) + skip_tags_option(settings, BOOT_WAIT_TAG)
        return playbook_command(venv, bundle, configure, options, extra_files)
    check = (settings.get('active_check') or {}).get('playbook', 'ocigpu.cluster.validate')
    options = ['--tags', '%s,%s' % (JOIN_TAG, CHECK_TAG)] + skip_tags_option(settings, BOOT_WAIT_TAG)
    return playbook_command(venv, bundle, [configure, check], options + _check_options(check_strategy), extra_files)


def active_check_command(venv, bundle, settings, extra_files, strategy='linear'):
    """The active NCCL check against this node (validate.yml --tags health: a short all_reduce over its
    GPUs against a fraction of the shape's gate), failing the run when the node falls short; with the
    configure run's strategy (the check starts all_reduce_perf alone, no mpirun)."""
    check = settings.get('active_check') or {}
    return playbook_command(venv, bundle, check.get('playbook', 'ocigpu.cluster.validate'),
                            ['--tags', CHECK_TAG] + _check_options(strategy), extra_files)


def write_inventory(bundle, name, python='/usr/bin/python3'):
    path = os.path.join(bundle, 'inventory.ini')
    with open(path, 'w') as f:
        f.write('[gpu_nodes]\n%s ansible_connection=local ansible_python_interpreter=%s\n' % (name, python))
    return path


MITOGEN_STRATEGY = 'ocigpu.cluster.mitogen_linear'


def write_ansible_cfg(bundle, venv):
    """The runs' ansible.cfg (they start in the bundle folder): Mitogen's strategy when the venv has Mitogen,
    one Python for the whole play instead of one per task; Ansible's default otherwise. The facts are kept
    in the bundle for the pull's later run (the active check), which so reads the node and its facts
    once (configure.yml learns them); each pull makes the bundle anew, and the bake removes it. Each task's
    start and length go in the log (ansible.posix's profile_tasks, which the bundle carries). Returns the
    strategy."""
    strategy = MITOGEN_STRATEGY if glob.glob(os.path.join(venv, 'lib', 'python*', 'site-packages', 'ansible_mitogen')) \
        else 'linear'
    # Root's alone: the facts hold what the metadata service told root (the firewall keeps it from others).
    facts = os.path.join(bundle, 'facts')
    if not os.path.isdir(facts):
        os.makedirs(facts, 0o700)
    os.chmod(facts, 0o700)
    with open(os.path.join(bundle, 'ansible.cfg'), 'w') as f:
        f.write('[defaults]\nstrategy = %s\ngathering = smart\nfact_caching = jsonfile\n'
                'fact_caching_connection = %s\nfact_caching_timeout = 3600\n'
                'callbacks_enabled = ansible.posix.profile_tasks\n' % (strategy, facts))
    return strategy


def run_configure(argv, bundle, log, log_file, run=subprocess.Popen, label='configure', seen=None):
    """One ansible-playbook run, its output in log_file and its progress on stdout; its exit status. seen
    (a dict of line beginnings) gets the time each first appeared."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(bundle, 'collections'),
               ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_HOST_KEY_CHECKING='0', ANSIBLE_LOCALHOST_WARNING='0', HOME=os.environ.get('HOME', '/root'))
    cfg = os.path.join(bundle, 'ansible.cfg')
    if os.path.exists(cfg):  # write_ansible_cfg's, whatever the environment names
        env['ANSIBLE_CONFIG'] = cfg
    log('%s: %s', label, ' '.join(argv))
    proc = run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=bundle)
    tail = []
    out = open(log_file, 'a') if log_file else None
    try:
        for raw in proc.stdout:
            line = raw.decode('utf-8', 'replace').rstrip()
            if seen is not None:
                for start in seen:
                    if seen[start] is None and line.startswith(start):
                        seen[start] = time.time()
            if out:
                out.write(line + '\n')
            if line.startswith(('PLAY [', 'TASK [', 'RUNNING HANDLER [')):
                tail.append(line)  # progress a person can follow in the journal
                print(line)
                sys.stdout.flush()
            elif line.startswith(('fatal:', 'failed:')) or ': ok=' in line:
                print(line)
                sys.stdout.flush()
        return proc.wait()
    finally:
        if out:
            out.close()


def last_failure(log_file, limit=300):
    """(the last failed task of the last run in log_file, in one line: what the node tells the controller when
    its pull fails; whether that task ran in the active check): in a run of configure.yml and then the check's
    playbook, a failure after the check's first play (CHECK_PLAY_LINE) is the check's."""
    try:
        with open(log_file, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 262144))
            text = f.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return '', False
    start = max(text.rfind(' configure: '), text.rfind(' active check: '))
    in_check = start >= 0 and text.startswith(' active check: ', start)
    run = text[start + 1:] if start >= 0 else text
    task, found, found_in_check = '', '', False
    for line in run.splitlines():
        if line.startswith('TASK ['):
            task = line[len('TASK ['):].split(']')[0]
        elif line.startswith(CHECK_PLAY_LINE):
            in_check = True
        elif line.startswith(('fatal:', 'failed:')):
            msg = line.split('=>', 1)[1].strip() if '=>' in line else line
            try:
                msg = json.loads(msg).get('msg') or msg
            except (ValueError, AttributeError):
                pass
            found = '%s: %s' % (task, msg) if task else str(msg)
            found_in_check = in_check
    return ' '.join(found.split())[:limit], found_in_check


def report_failure(ctl, instance_id, name, message, log, attempts=3, sleep=time.sleep):
    """Tell the controller that this node's pull failed, so that Slurm gets the node back now rather than
    at ResumeTimeout; best effort (the timeout still ends it when the controller cannot be told)."""
    try:
        retry(lambda: ctl.request('POST', '/v1/failed', body=dict(instance_id=instance_id, name=name, message=message),
                                  privileged=True), attempts, 5, log, 'reporting the failure', sleep=sleep)
    except PullError as exc:
        log('pull: could not tell the controller (%s); Slurm takes the node back at ResumeTimeout', exc)
        return False
    log('pull: told the controller; it hands %s back to Slurm, which requeues its jobs', name)
    return True


# The whole pull ---------------------------------------------------------------------------------

def wait_for_cloud_init(log, timeout=1800, run=subprocess.run, which=shutil.which):
    """cloud-init's own wait (``cloud-init status --wait``), as boot_wait.yml does it over SSH for a push:
    the user_data script that starts this service is cloud-init's, and the roles must not run beside
    what cloud-init still does. None when done, or on an image without cloud-init (the test stand-ins);
    else what is wrong. Exit status 1 and 2 are a cloud-init that finished with errors: said, not fatal,
    as in boot_wait.yml."""
    program = which('cloud-init')
    if not program:
        log('pull: no cloud-init on this image; nothing to wait for')
        return None
    try:
        proc = run([program, 'status', '--wait'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                   check=False)
    except subprocess.TimeoutExpired:
        return 'cloud-init still running after %d s' % timeout
    out = (proc.stdout or b'').decode('utf-8', 'replace').split()
    if proc.returncode in (1, 2):
        log('pull: cloud-init finished with errors (/var/log/cloud-init.log); configuring anyway')
    elif proc.returncode != 0:
        return 'cloud-init status failed (rc %d): %s' % (proc.returncode, ' '.join(out)[-200:])
    return None


def uptime():
    try:
        with open('/proc/uptime') as f:
            return float(f.read().split()[0])
    except (IOError, OSError, ValueError):
        return None


def run_health_checks(log, run=subprocess.run, program='/usr/local/sbin/ocigpu-healthcheck'):
    """The node's passive health checks (the node_health role's program, without telling Slurm), before
    slurmd starts: (0, '') when they pass or the program is not installed, else (1, the failed checks)."""
    if not os.path.exists(program):
        return 0, ''
    try:
        proc = run([program, '--no-slurm'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=600)
    except subprocess.TimeoutExpired:
        return 1, '%s did not finish in 600s' % program
    lines = proc.stdout.decode('utf-8', 'replace').splitlines()
    failed = [line[len('FAIL '):].strip() for line in lines if line.startswith('FAIL ')]
    if proc.returncode == 0:
        log('pull: the health checks pass (%d)', len([line for line in lines if line.startswith('ok ')]))
        return 0, ''
    return 1, '; '.join(failed) or 'exit %d' % proc.returncode


def start_slurmd(log, run=subprocess.run):
    """One start of slurmd, after every role ran (the slurm role only enables it on a joining node)."""
    proc = run(['systemctl', 'restart', 'slurmd'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        log('slurmd: systemctl restart slurmd failed: %s', proc.stdout.decode('utf-8', 'replace').strip())
    return proc.returncode


def children_cpu():
    """User and system seconds of this process's children that ended and were waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pull(opts, log, fetch_imds=imds_instance, controller_cls=Controller, venv_fn=make_venv, configure_fn=run_configure,
         start_fn=start_slurmd, check_fn=run_health_checks, active_fn=None, cloud_init_fn=wait_for_cloud_init):
    timings = dict(uptime_at_start=uptime(), started=time.time())
    mark = time.time()

    def lap(key):
        now = time.time()
        timings[key] = round(now - lap.mark, 2)
        lap.mark = now
    lap.mark = mark

    log('pull: reading this instance\'s tags from %s', opts.imds_url)
    found, doc = wait_for_tags(opts.imds_url, opts.wait, opts.poll, log, fetch=fetch_imds)
    if not found:
        log('pull: no Slurm name after %ds; this node is not an on-demand node (configure.yml builds it by push)',
            opts.wait)
        return EXIT_NO_TAGS, timings
    name, server, cert = found
    timings['name'] = name
    lap('wait_tags')
    log('pull: Slurm name %s, controller %s (certificate %s...)', name, server, cert[:16])

    ctl = controller_cls(server, cert, timeout=opts.timeout)
    problem = cloud_init_fn(log)
    if problem:
        log('pull: %s; slurmd stays stopped', problem)
        report_failure(ctl, doc.get('id'), name, problem, log)
        return 1, timings
    lap('cloud_init')
    bundle = os.path.join(opts.prefix, 'bundle')
    if os.path.isdir(bundle):
        shutil.rmtree(bundle)
    os.makedirs(bundle)
    archive = os.path.join(opts.prefix, 'bundle.tar.gz')
    retry(lambda: ctl.request('GET', '/v1/bundle', out=archive), 30, 10, log, 'fetching the bundle')
    safe_extract(archive, bundle)
    with open(os.path.join(bundle, 'pull.json')) as f:
        settings = json.load(f)
    log('pull: bundle of %d bytes (%s)', os.path.getsize(archive), collection_label(settings))
    lap('fetch_bundle')

    # On a baked image: the bundle must be the one it was baked for (never half-used).
    digests = bundle_digests(bundle)
    state, manifest = baked_check(getattr(opts, 'manifest', DEFAULTS['manifest']), digests, settings)
    timings['baked'] = state == 'skip'
    if state == 'refuse':
        log('pull: refusing this image: %s; slurmd stays stopped', manifest)
        report_failure(ctl, doc.get('id'), name, manifest, log)
        return 1, timings
    if state == 'full':
        log('pull: baked image (bundle %s): settings changed since the bake: every step runs again',
            str(manifest.get('bundle_digest'))[:12])
    elif state == 'skip':
        log('pull: baked image current (bundle %s): only the per-node steps (--tags %s) of the baked roles %s',
            digests['bundle_digest'][:12], JOIN_TAG, ', '.join(manifest.get('roles') or []) or '(none)')

    answer = retry(lambda: ctl.request('POST', '/v1/join', body=dict(instance_id=doc.get('id'), name=name), privileged=True),
                   6, 10, log, 'joining')
    secrets = os.path.join(opts.prefix, 'join.json')
    write_private(secrets, join_vars(answer, name))
    log('pull: joined as %s; slurmctld at %s', name, answer['conf_server'])
    lap('join')

    try:
        baked_venv = manifest.get('venv') if state == 'skip' else None
        if baked_venv and manifest.get('ansible_core') == settings.get('ansible_core', 'ansible-core') \
                and manifest.get('mitogen', '') == settings.get('mitogen', '') \
                and os.path.exists(os.path.join(baked_venv, 'bin', 'ansible-playbook')):
            log('ansible: the baked %s in %s', ' '.join(requirements(manifest)), baked_venv)
            venv = baked_venv
        else:
            venv = venv_fn(opts.prefix, settings, log)
        lap('ansible')
        write_inventory(bundle, name)
        timings['strategy'] = write_ansible_cfg(bundle, venv)
        log('ansible: strategy %s', timings['strategy'])
        extra = [os.path.join(bundle, 'node-vars.yml'), secrets]
        # The cluster's lock file came in the bundle: this node gets the bytes the cluster's other
        # nodes got (docs/artifacts.md); strict as the controller's run was.
        local_vars = dict(ocigpu_lock_file=os.path.join(bundle, 'ocigpu.lock.yml'),
                          ocigpu_artifacts_strict=bool(settings.get('artifacts_strict', False)))
        if opts.imds_url != IMDS_URL:
            local_vars['ocigpu_imds_url'] = opts.imds_url
        local = os.path.join(bundle, 'local-vars.json')
        with open(local, 'w') as f:
            json.dump(local_vars, f)
        extra.append(local)
        # On a current baked image the active check runs in the same ansible-playbook, after the per-node
        # steps (configure_command); the passive checks then come after it.
        together = state == 'skip' and bool(settings.get('active_check'))
        cpu = children_cpu()
        argv = configure_command(venv, bundle, name, settings, extra, join_only=state == 'skip',
                                 check_strategy=timings['strategy'] if together else None)
        if together:
            seen = {CHECK_PLAY_LINE: None}
            rc = configure_fn(argv, bundle, log, opts.log_file, seen=seen)
            lap('configure')
            if seen[CHECK_PLAY_LINE]:  # the run's time split where the check's playbook started
                timings['active_check'] = round(time.time() - seen[CHECK_PLAY_LINE], 2)
                timings['configure'] = round(timings['configure'] - timings['active_check'], 2)
        else:
            rc = configure_fn(argv, bundle, log, opts.log_file)
            lap('configure')
        # The processor time of the run and all it waited for (Ansible, its modules; not the daemons it
        # started): what nodes that share processors (the test stand-ins) take from each other.
        timings['configure_cpu'] = round(children_cpu() - cpu, 2)
    finally:
        os.remove(secrets)
    extra.remove(secrets)
    timings['total'] = round(time.time() - mark, 2)
    if rc != 0:
        summary, in_check = last_failure(opts.log_file)
        if together and in_check:
            log('pull: the active NCCL check failed (exit %d); slurmd stays stopped', rc)
            report_failure(ctl, doc.get('id'), name, 'active NCCL check failed: %s' % (
                summary or 'exit %d, see %s' % (rc, opts.log_file)), log)
            return 1, timings
        log('pull: configure failed (exit %d); the full output is in %s; slurmd stays stopped', rc, opts.log_file)
        report_failure(ctl, doc.get('id'), name, 'configure failed (exit %d): %s' % (
            rc, summary or 'see %s' % opts.log_file), log)
        return 1, timings
    if together:
        log('pull: the active NCCL check passes')
    # A node that fails its checks never registers: slurmctld would give it a job first.
    status, failed = check_fn(log)
    lap('checks')
    if status != 0:
        log('pull: the health checks failed (%s); slurmd stays stopped', failed)
        report_failure(ctl, doc.get('id'), name, 'health checks failed: %s' % failed, log)
        return 1, timings
    if settings.get('active_check') and not together:
        # The self-healing loop's new instances (and any on-demand node, where the cluster asks for
        # it) are checked actively too before slurmd starts: the short all_reduce of validate.yml.
        active_fn = active_fn or functools.partial(run_configure, label='active check')
        rc = active_fn(active_check_command(venv, bundle, settings, extra, timings['strategy']), bundle, log, opts.log_file)
        lap('active_check')
        if rc != 0:
            log('pull: the active NCCL check failed (exit %d); slurmd stays stopped', rc)
            report_failure(ctl, doc.get('id'), name, 'active NCCL check failed: %s' % (
                last_failure(opts.log_file)[0] or 'exit %d, see %s' % (rc, opts.log_file)), log)
            return 1, timings
        log('pull: the active NCCL check passes')
    if start_fn(log) != 0:
        report_failure(ctl, doc.get('id'), name, 'slurmd did not start', log)
        return 1, timings
    lap('slurmd_start')
    timings['total'] = round(time.time() - mark, 2)
    log('pull: %s configured in %.0fs; slurmd started, registering with %s', name, timings['total'], answer['conf_server'])
    return 0, timings


# --bake: make this machine the image that nodes boot from ---------------------------------------

def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    else:
        return False
    return True


def bake_clean(opts, log, run=subprocess.run):
    """Remove what must not be in an image: the bundle, the pull's state and log, host keys, the machine id,
    cloud-init's state and logs, Ansible's, the journal, /tmp. Paths outside the pull's own folders are taken
    under opts.root (for tests); the journal only when it is /."""
    def under(pattern):
        return sorted(glob.glob(os.path.join(opts.root, pattern.lstrip('/'))))
    paths = [os.path.join(opts.prefix, 'bundle'), os.path.join(opts.prefix, 'bundle.tar.gz'), opts.log_file]
    paths += sorted(glob.glob(os.path.join(opts.state_dir, '*')))
    for pattern in ('/etc/ssh/ssh_host_*', '/var/lib/dbus/machine-id', '/var/lib/cloud/instances', '/var/lib/cloud/instance',
                    '/var/log/cloud-init*.log', '/root/.ansible/*', '/tmp/*'):
        paths += under(pattern)
    # Not the files of the Ansible task that runs this program (its module's payload in /tmp, its folder
    # under ~/.ansible/tmp): removed under it, the task fails; Ansible removes them when the task ends.
    paths = [path for path in paths if not os.path.basename(path).startswith('ansible') and path != os.path.join(
        opts.root, 'root/.ansible/tmp')]
    removed = [path for path in paths if _remove(path)]
    machine_id = os.path.join(opts.root, 'etc/machine-id')
    if os.path.exists(machine_id):
        open(machine_id, 'w').close()  # empty: systemd makes a new one at the first boot
        removed.append(machine_id + ' (emptied)')
    if os.path.realpath(opts.root) == '/':
        for argv in (['journalctl', '--rotate'], ['journalctl', '--vacuum-time=1s']):
            proc = run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0:
                log('bake: %s failed: %s', ' '.join(argv), proc.stdout.decode('utf-8', 'replace').strip())
    log('bake: cleaned %d paths: %s', len(removed), ' '.join(removed))
    return removed


def write_manifest(path, manifest):
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    fd = os.open(path + '.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, 'w') as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write('\n')
    os.chmod(path + '.tmp', 0o644)
    os.rename(path + '.tmp', path)


def bake(opts, log, venv_fn=make_venv, configure_fn=run_configure, run=subprocess.run):
    """On the builder, as root: the bundle's roles against this machine less their per-node steps (no join:
    no secret), then the manifest, then the cleaning. (rc, manifest)."""
    bundle = os.path.join(opts.prefix, 'bundle')
    if os.path.isdir(bundle):
        shutil.rmtree(bundle)
    os.makedirs(bundle)
    safe_extract(opts.bake, bundle)
    with open(os.path.join(bundle, 'pull.json')) as f:
        settings = json.load(f)
    digests = bundle_digests(bundle)
    log('bake: bundle %s (%s, lock %s)', digests['bundle_digest'][:12], collection_label(settings), digests['lock_digest'][:12])
    venv = venv_fn(opts.prefix, settings, log)
    write_inventory(bundle, 'bake')
    log('bake: strategy %s', write_ansible_cfg(bundle, venv))
    local = os.path.join(bundle, 'local-vars.json')
    with open(local, 'w') as f:
        json.dump(dict(ocigpu_lock_file=os.path.join(bundle, 'ocigpu.lock.yml'),
                       ocigpu_artifacts_strict=bool(settings.get('artifacts_strict', False))), f)
    # The playbook writes the roles that ran (as their configure_* switches and the skip tags leave them) here.
    result = os.path.join(opts.state_dir, 'bake.json')
    # configure.yml's steps less the per-node ones (the tasks tagged JOIN_TAG), and those the settings skip.
    options = ['-e', 'ocigpu_bake_result_file=' + result, '-e', 'ocigpu_baking=true'] + skip_tags_option(settings, JOIN_TAG)
    if settings.get('active_check'):
        # The nodes check themselves with nccl-tests at their join: it is built into the image.
        options += ['-e', 'ocigpu_bake_active_check=true']
    argv = playbook_command(venv, bundle, BAKE_PLAYBOOK, options, [os.path.join(bundle, 'node-vars.yml'), local])
    rc = configure_fn(argv, bundle, log, opts.log_file)
    if rc != 0:
        log('bake: %s failed (exit %d); no manifest written; the output is in %s', BAKE_PLAYBOOK, rc, opts.log_file)
        return rc, None
    try:
        with open(result) as f:
            ran = json.load(f).get('roles') or []
    except (IOError, ValueError) as exc:
        raise PullError('%s left no list of the roles it ran in %s (%s)' % (BAKE_PLAYBOOK, result, exc))
    manifest = dict(format=MANIFEST_FORMAT, cluster=opts.cluster or settings.get('cluster_name') or '',
                    collection=collection_label(settings), roles=sorted(ran), join_tag=JOIN_TAG, baked_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                    venv=venv, ansible_core=settings.get('ansible_core', 'ansible-core'),
                    mitogen=settings.get('mitogen', ''), **digests)
    write_manifest(opts.manifest, manifest)
    log('bake: wrote %s (roles %s)', opts.manifest, ', '.join(manifest['roles']) or 'none')
    log.path = None  # the log file goes with the cleaning
    bake_clean(opts, log, run=run)
    return 0, manifest


def print_digest(archive):
    """--digest: the bundle's four digests as JSON (the bake playbook tags the image with bundle_digest)."""
    folder = tempfile.mkdtemp(prefix='ocigpu-digest-')
    try:
        safe_extract(archive, folder)
        print(json.dumps(bundle_digests(folder), indent=1, sort_keys=True))
    finally:
        shutil.rmtree(folder)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog='ocigpu-pull', description='Configure this GPU node from its controller.')
    parser.add_argument('--imds-url', default=os.environ.get('OCIGPU_IMDS_URL') or DEFAULTS['imds_url'])
    parser.add_argument('--wait', type=int, default=int(os.environ.get('OCIGPU_PULL_WAIT') or DEFAULTS['wait']),
                        help='seconds to wait for the Slurm name tag (default %(default)s)')
    parser.add_argument('--poll', type=float, default=DEFAULTS['poll'])
    parser.add_argument('--prefix', default=DEFAULTS['prefix'])
    parser.add_argument('--state-dir', default=DEFAULTS['state_dir'])
    parser.add_argument('--log-file', default=DEFAULTS['log_file'])
    parser.add_argument('--timeout', type=int, default=DEFAULTS['timeout'])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--bake', metavar='BUNDLE.tar.gz', help='configure this machine as a baked image (on the builder, as root)')
    mode.add_argument('--digest', metavar='BUNDLE.tar.gz', help="print the bundle's digests as JSON and exit")
    parser.add_argument('--cluster', default='', help="--bake: the cluster's name for the manifest")
    parser.add_argument('--manifest', default=DEFAULTS['manifest'], help='the baked image manifest (default %(default)s)')
    parser.add_argument('--root', default=DEFAULTS['root'], help='--bake: clean the system files under this folder')
    opts = parser.parse_args(argv)
    if opts.digest:
        try:
            return print_digest(opts.digest)
        except (PullError, EnvironmentError, tarfile.TarError) as exc:
            sys.stderr.write('ocigpu-pull: --digest %s: %s\n' % (opts.digest, exc))
            return 1
    for d in (opts.prefix, opts.state_dir):
        if not os.path.isdir(d):
            os.makedirs(d, 0o700)
    log = Log(opts.log_file)
    if opts.bake:
        try:
            rc, manifest = bake(opts, log)
        except (PullError, EnvironmentError, tarfile.TarError) as exc:
            log('bake: failed: %s', exc)
            return 1
        if manifest:
            print(json.dumps(manifest, indent=1, sort_keys=True))
        return rc
    try:
        rc, timings = pull(opts, log)
    except PullError as exc:
        log('pull: failed: %s', exc)
        rc, timings = 1, dict(error=str(exc))
    timings['rc'] = rc
    if rc in (0, EXIT_NO_TAGS):
        # Either way the next boot has nothing to pull: the unit's condition reads these.
        open(os.path.join(opts.state_dir, 'joined' if rc == 0 else 'static'), 'w').close()
    with open(os.path.join(opts.state_dir, 'pull.json'), 'w') as f:
        json.dump(timings, f, indent=1, sort_keys=True)
    return 0 if rc == EXIT_NO_TAGS else rc


if __name__ == '__main__':
    sys.exit(main())
