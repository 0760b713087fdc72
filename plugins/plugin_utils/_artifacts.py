# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's lock file of downloaded artifacts (docs/artifacts.md).

Every file a role downloads (a release archive, a package, a source archive) gets one expected
sha256 before any node downloads it, decided on the controller in this order:

1. the lock file, when it holds the file: what the cluster's first node got, every later node gets;
2. a sum the user set (a role's ``*_sha256`` / ``*_checksums`` setting);
3. the role's table of verified sums;
4. the upstream's own published checksum file (``SHA256SUMS``, ``<file>.sha256sum``...), fetched from
   where the file itself comes from (a mirror serves both);
5. where the upstream publishes none: the sha256 of a first download on the controller (trust on
   first use, said loudly).

Whatever 2 to 5 decide is written to the lock file at once, so that every node of the run, and every
later node (pushed, pulled by an on-demand node, or replaced), is held to the same bytes. A setting or
table entry that disagrees with the lock stops the run with both sums: the cluster's nodes run the
locked bytes, and only removing the entry moves them to other ones. Strict mode accepts only 1 to 3.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import hashlib
import os
import re
import tempfile

import yaml

from ansible.module_utils.urls import open_url

SHA256 = re.compile(r'^[0-9a-f]{64}$')
# The first line of every lock file this collection writes: what tells its own lock files from any other
# file (a file without it is taken only if it holds the artifacts mapping and nothing else).
MARKER = '# ocigpu.cluster lock file'
HEADER = MARKER + """: the sha256 of every file the cluster's roles download, fixed when it was
# first resolved (docs/artifacts.md). Commit it beside the cluster's vars: every later node, pushed,
# pulled, autoscaled or replaced, gets exactly these bytes or stops before installing anything.
# To move the cluster to other bytes for a file, remove its entry; a new version gets an entry of its own.
"""
FETCH_TIMEOUT = 60


class ArtifactError(Exception):
    """A problem with the artifacts' inputs or the lock, said in words a user can act on."""


def _check_sum(value, what):
    value = (value or '').strip().lower()
    if value and not SHA256.match(value):
        raise ArtifactError('%s: %r is not a sha256 (64 hex digits)' % (what, value))
    return value


def normalize(artifacts):
    """Check the role's list of artifacts; a list of dicts with every key."""
    if not isinstance(artifacts, list):
        raise ArtifactError('artifacts must be a list of dicts')
    out = []
    seen = set()
    for number, item in enumerate(artifacts, 1):
        if not isinstance(item, dict):
            raise ArtifactError('artifacts item %d is not a dict' % number)
        unknown = sorted(set(item) - {'name', 'url', 'sha256', 'known', 'sums_url', 'setting'})
        if unknown:
            raise ArtifactError('artifacts item %d: unknown keys %s' % (number, ', '.join(unknown)))
        name = str(item.get('name') or '').strip()
        url = str(item.get('url') or '').strip()
        if not name or not url:
            raise ArtifactError('artifacts item %d needs a name and a url' % number)
        if name in seen:
            raise ArtifactError('artifacts: %s is listed twice' % name)
        seen.add(name)
        setting = str(item.get('setting') or 'the role\'s sum setting')
        out.append({
            'name': name,
            'url': url,
            'sha256': _check_sum(item.get('sha256'), '%s (%s)' % (name, setting)),
            'known': _check_sum(item.get('known'), '%s (the role\'s table)' % name),
            'sums_url': str(item.get('sums_url') or '').strip(),
            'setting': setting,
        })
    return out


def read_lock(path):
    """The lock's entries ({name: {sha256, source, url, locked}}); {} when the file is absent or empty.

    A file that is there and is not a lock file of this collection (cluster.yml, a README) is refused:
    the lock is written over it, so taking it would lose what it holds."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError('cannot read the lock file %s: %s' % (path, getattr(exc, 'strerror', None) or exc))
    if not text.strip():
        return {}  # nothing in it to lose (a file made with touch)
    marked = text.startswith(MARKER)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if not marked:
            raise ArtifactError(not_ours(path, 'it is not YAML'))
        raise ArtifactError('cannot read the lock file %s: %s' % (path, exc))
    if not marked and not (isinstance(data, dict) and set(data) == {'artifacts'}):
        if isinstance(data, dict):
            keys = sorted(str(k) for k in data)
            why = 'it holds other keys than artifacts: %s%s' % (', '.join(keys[:5]), ', ...' if len(keys) > 5 else '')
        else:
            why = 'it is not a YAML mapping'
        raise ArtifactError(not_ours(path, why))
    entries = data.get('artifacts') if isinstance(data, dict) else None
    if entries is None:
        entries = {}
    if not isinstance(entries, dict):
        raise ArtifactError('the lock file %s has no artifacts mapping' % path)
    for name, entry in entries.items():
        if not isinstance(entry, dict) or not SHA256.match(str(entry.get('sha256', ''))):
            raise ArtifactError('the lock file %s: entry %s has no valid sha256' % (path, name))
    return entries


def not_ours(path, why):
    return ('refusing to write the lock file over %s: it is not a lock file written by ocigpu.cluster (its first line '
            'is not "%s", and %s), and writing would replace what it holds. Give the lock file a path of its own '
            '(lock_file, or the variable ocigpu_lock_file; by default <cluster>.lock.yml)' % (path, MARKER, why))


def parse_sums(text, filename):
    """The sha256 of filename in a checksum file's text (`<sum>  <name>` lines, or one bare sum)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith('#')]
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and SHA256.match(parts[0].lower()):
            name = parts[-1].lstrip('*')
            if name.startswith('./'):
                name = name[2:]
            if os.path.basename(name) == filename:
                return parts[0].lower()
    if len(lines) == 1 and SHA256.match(lines[0].split()[0].lower()) and len(lines[0].split()) == 1:
        return lines[0].split()[0].lower()
    return None


def _open(url):
    # The roles' own URLs: http(s), or file:// for a copy on the controller.
    return open_url(url, timeout=FETCH_TIMEOUT, http_agent='ocigpu.cluster artifact_lock')


def fetch_sum(sums_url, filename):
    try:
        with _open(sums_url) as response:
            text = response.read(1 << 20).decode('utf-8', 'replace')
    except Exception as exc:  # urllib raises many kinds
        raise ArtifactError('cannot fetch the checksum file %s: %s' % (sums_url, exc))
    value = parse_sums(text, filename)
    if not value:
        raise ArtifactError('the checksum file %s lists no sha256 for %s' % (sums_url, filename))
    return value


def download_sum(url):
    digest = hashlib.sha256()
    try:
        with _open(url) as response:
            for chunk in iter(lambda: response.read(1 << 20), b''):
                digest.update(chunk)
    except Exception as exc:
        raise ArtifactError('cannot download %s to compute its sha256: %s' % (url, exc))
    return digest.hexdigest()


def resolve(artifacts, lock, strict=False, fetch=fetch_sum, download=download_sum):
    """Decide each artifact's sha256; (sums, sources, new lock entries, warnings)."""
    sums, sources, new, warnings, problems = {}, {}, {}, [], []
    for item in artifacts:
        name, filename = item['name'], os.path.basename(item['url'].split('?')[0])
        locked = (lock.get(name) or {}).get('sha256')
        if locked:
            # The setting wins over the table (as when nothing is locked): only the sum in force is compared.
            given, what = ((item['sha256'], item['setting']) if item['sha256']
                           else (item['known'], "the role's table of verified sums"))
            if given and given != locked:
                problems.append(
                    '%s: %s gives sha256 %s, but the lock file holds %s (locked %s from %s): the cluster\'s '
                    'nodes run the locked bytes. Remove the entry from the lock file to move the cluster to '
                    'other bytes, or correct the setting.'
                    % (name, what, given, locked, lock[name].get('locked', '?'), lock[name].get('source', '?')))
            sums[name], sources[name] = locked, 'lock'
            continue
        try:
            if item['sha256']:
                value, source = item['sha256'], 'setting'
            elif item['known']:
                value, source = item['known'], 'table'
            elif strict:
                problems.append(
                    '%s: strict mode accepts only a pinned sum or the lock file, and it has neither. Set %s, '
                    'or run once without ocigpu_artifacts_strict to lock what %s publishes.'
                    % (name, item['setting'], item['sums_url'] or item['url']))
                continue
            elif item['sums_url']:
                value, source = fetch(item['sums_url'], filename), 'checksum file'
            else:
                value, source = download(item['url']), 'first download'
                warnings.append(
                    '%s: its upstream publishes no checksum file; locked the sha256 of a first download on the '
                    'controller (%s). Check it, and commit the lock file.' % (name, value))
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        sums[name], sources[name] = value, source
        new[name] = {'sha256': value, 'source': item['sums_url'] if source == 'checksum file' else source,
                     'url': item['url'], 'locked': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}
    if problems:
        raise ArtifactError('\n'.join(problems))
    return sums, sources, new, warnings


def _flock_path(path):
    key = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), 'ocigpu-lockfile-%s.flock' % key)


def dump(entries):
    return HEADER + yaml.safe_dump({'artifacts': entries}, default_flow_style=False, sort_keys=True, width=1000)


def _write(path, entries):
    folder = os.path.dirname(path)
    try:
        handle, temp = tempfile.mkstemp(dir=folder, prefix='.ocigpu-lock-')
    except OSError as exc:
        raise ArtifactError(_write_error(path, exc))
    try:
        with os.fdopen(handle, 'w') as out:
            out.write(dump(entries))
        os.chmod(temp, os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644)
        os.rename(temp, path)
    except OSError as exc:
        if os.path.exists(temp):
            os.unlink(temp)
        raise ArtifactError(_write_error(path, exc))
    except Exception:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _write_error(path, exc):
    folder = os.path.dirname(path)
    if exc.errno == errno.ENOENT and not os.path.isdir(folder):
        return 'cannot write the lock file %s: folder %s does not exist' % (path, folder)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return 'cannot write the lock file %s: folder %s is not writable by this user (%s)' % (path, folder, exc.strerror)
    return 'cannot write the lock file %s: %s' % (path, exc.strerror or exc)


def lock_artifacts(path, artifacts, strict=False, write=True, fetch=fetch_sum, download=download_sum):
    """Resolve artifacts against the lock file at path and add what was decided; (sums, sources, added, warnings).

    Runs under an exclusive lock (one per lock file, across the run's forks): the first host of a run
    decides and writes, the others find the entries locked and make no download.
    """
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    # Said before anything is downloaded or fetched.
    if not os.path.isdir(folder):
        raise ArtifactError('cannot write the lock file %s: folder %s does not exist' % (path, folder))
    if os.path.isdir(path):
        raise ArtifactError('cannot write the lock file %s: it is a folder' % path)
    if write and not os.access(folder, os.W_OK | os.X_OK):
        raise ArtifactError('cannot write the lock file %s: folder %s is not writable by this user' % (path, folder))
    with open(_flock_path(path), 'a') as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        entries = read_lock(path)
        sums, sources, new, warnings = resolve(artifacts, entries, strict=strict, fetch=fetch, download=download)
        if new and write:
            entries.update(new)
            _write(path, entries)
        return sums, sources, sorted(new), warnings
