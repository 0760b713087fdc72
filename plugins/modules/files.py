#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: files
short_description: Write several files with their content, owner, group and mode, in one task
version_added: 0.4.0
description:
  - Writes each file of O(files) whose content differs from C(content), and sets the owner, group and
    mode of each file that differs. A file is replaced atomically (written beside it, then renamed).
  - One task and one remote call for a role's set of small files, where a loop over
    M(ansible.builtin.template) makes at least one call per file; on an idempotent re-run of a
    cluster's configuration those calls add up. Render templates on the controller with
    C(lookup('ansible.builtin.template', 'name.j2')).
  - Every new content that has a C(validate) command is checked before any file is replaced, so a
    content that fails its check changes nothing, also among the other files of the task.
  - With O(folders), also makes sure of the folders that the files go in (and any others), as
    M(ocigpu.cluster.folders) does, before the files are written, so that a role's folders and files take one call.
  - Fails, before changing anything, when a path is not absolute, is a folder, or its folder is missing
    and not among O(folders).
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  files:
    description:
      - The files, each a dict with its C(dest) (absolute path) and C(content) (text), and any of
        C(owner), C(group), C(mode) that differ from O(owner), O(group) and O(mode).
      - C(content_b64) in place of C(content) gives bytes in base64, for a file that is not text (a key).
        Such a file shows no diff; give the task C(no_log) when the bytes are a secret.
      - C(validate) is a command run on the new content before it replaces the file, with C(%s) standing
        for the path of the new content, as for M(ansible.builtin.template).
      - C(state=absent) (with C(dest) alone) removes the file if it is there.
    type: list
    elements: dict
    required: true
  owner:
    description:
      - Owner (name or uid) of every file that names none.
      - Unset, a new file belongs to the user the module runs as and an existing one keeps its owner.
    type: str
  group:
    description: Group (name or gid) of every file that names none. Unset, as for O(owner).
    type: str
  mode:
    description:
      - Permissions of every file that names none, as for M(ansible.builtin.file) (V('0644'), V(u=rw,g=r,o=r)).
      - Unset, a new file gets the umask's and an existing one keeps its own.
    type: raw
  folders:
    description:
      - Folders to create when missing (with their missing parents) and whose owner, group and mode to
        set, before any file is written. An item is the folder's absolute path, or a dict with its
        C(path) and any of C(owner), C(group) and C(mode), as for M(ocigpu.cluster.folders).
      - A folder that names none gets O(owner), O(group) and O(folder_mode).
    type: list
    elements: raw
    default: []
    version_added: 0.4.0
  folder_mode:
    description:
      - Permissions of every folder of O(folders) that names none. Unset, a new folder gets the umask's.
    type: raw
    version_added: 0.4.0
seealso:
  - module: ansible.builtin.template
  - module: ocigpu.cluster.folders
"""

EXAMPLES = r"""
- name: Write the Slurm configuration
  ocigpu.cluster.files:
    files:
      - dest: /etc/slurm/slurm.conf
        content: "{{ lookup('ansible.builtin.template', 'slurm.conf.j2') }}"
      - dest: /etc/slurm/cgroup.conf
        content: "{{ lookup('ansible.builtin.template', 'cgroup.conf.j2') }}"
      - dest: /etc/sudoers.d/slurm
        content: "{{ lookup('ansible.builtin.template', 'sudoers.j2') }}"
        mode: "0440"
        validate: visudo -cf %s
    owner: root
    group: root
    mode: "0644"
  register: slurm_config
  notify: Restart slurmd

- name: Say which files changed
  ansible.builtin.debug:
    var: slurm_config.changed_files
"""

RETURN = r"""
created:
  description: Folders of O(folders) created (or, in check mode, that would be), parents first.
  returned: always
  type: list
  elements: str
  sample: [/opt/ocigpu/rdma-exporter]
changed_folders:
  description: Folders of O(folders) whose owner, group or mode was set (or would be).
  returned: always
  type: list
  elements: str
changed_files:
  description: Files whose content, owner, group or mode was set (or, in check mode, would be), in the order given.
  returned: always
  type: list
  elements: str
  sample: [/etc/slurm/slurm.conf]
removed:
  description: Files removed (or that would be), for items with C(state=absent).
  returned: always
  type: list
  elements: str
  sample: [/etc/slurm/gres.conf]
written:
  description: The files of RV(changed_files) whose content was written (or would be); the others got only attributes.
  returned: always
  type: list
  elements: str
  sample: [/etc/slurm/slurm.conf]
"""

import base64
import binascii
import os
import shlex
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible_collections.ocigpu.cluster.plugins.module_utils._fsattrs import (
    ensure_folders, folder_specs, fs_attrs, item_attrs, unknown_ids)
from ansible_collections.ocigpu.cluster.plugins.module_utils._items import item_problem

FIELDS = ('dest', 'content', 'content_b64', 'owner', 'group', 'mode', 'validate', 'state')


def _promised(folders):
    """The folders that O(folders) makes sure of, with their parents."""
    promised = set()
    for spec in folders:
        path = spec['path']
        while path not in promised and os.path.dirname(path) != path:
            promised.add(path)
            path = os.path.dirname(path)
    return promised


def _specs(module, promised):
    """Each file to write with the module's owner, group and mode filled in, the paths to remove, and the
    problems of the items that are not right."""
    params = module.params
    specs, problems, absent = [], [], []
    seen = set()
    for item in params['files']:
        problem = item_problem(item, 'dest', FIELDS)
        if problem:
            problems.append(problem)
            continue
        dest = item['dest']
        state = item.get('state', 'present')
        if state not in ('present', 'absent'):
            problems.append('%s: state must be present or absent, got %s' % (dest, state))
            continue
        if state == 'absent':
            if not os.path.isabs(dest) or os.path.isdir(dest):
                problems.append('%s is not an absolute path to a file' % dest)
                continue
            absent.append(os.path.normpath(dest))
            continue
        if ('content' in item) == ('content_b64' in item):
            problems.append('%s: give content or content_b64, not %s' % (dest, 'both' if 'content' in item else 'neither'))
            continue
        source = 'content' if 'content' in item else 'content_b64'
        if not isinstance(item[source], str):
            problems.append('%s: %s must be text, got %s' % (dest, source, type(item[source]).__name__))
            continue
        if source == 'content_b64':
            try:
                data = base64.b64decode(''.join(item[source].split()), validate=True)
            except (binascii.Error, ValueError):
                problems.append('%s: content_b64 is not base64' % dest)
                continue
        else:
            data = to_bytes(item[source], errors='surrogate_or_strict')
        if not os.path.isabs(dest):
            problems.append('%s is not an absolute path' % dest)
            continue
        dest = os.path.normpath(dest)
        if dest in seen:
            problems.append('%s is given twice' % dest)
            continue
        seen.add(dest)
        if os.path.isdir(dest):
            problems.append('%s is a folder' % dest)
            continue
        if not os.path.isdir(os.path.dirname(dest)) and os.path.dirname(dest) not in promised and not module.check_mode:
            problems.append('the folder of %s is missing' % dest)
            continue
        spec = item_attrs(item, params)
        spec.update(dest=dest, content=data, binary=source == 'content_b64', validate=item.get('validate'))
        specs.append(spec)
    return specs, absent, problems


def _read(path):
    """The file's bytes, None when it is missing; an OSError (a parent that is a file, no permission) goes up."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _discard(staged):
    for spec in staged:
        try:
            os.unlink(spec['tmp'])
        except OSError:
            pass


def _stage(module, spec):
    """Write the new content beside its file, with the file's attributes, and run its validate command."""
    handle, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(spec['dest']), dir=os.path.dirname(spec['dest']))
    spec['tmp'] = tmp
    with os.fdopen(handle, 'wb') as out:
        out.write(spec['content'])
    # The staged file gets its final owner, group and mode before it is renamed over the file, so the
    # file never has others' (a new munge key is never readable by all, not even for a moment). What the
    # spec leaves unset comes from the file it replaces, or for a new file from the umask.
    attrs = fs_attrs(tmp, spec)
    try:
        current = os.stat(spec['dest'])
    except FileNotFoundError:
        current = None
    if attrs['mode'] is None:
        umask = os.umask(0)
        os.umask(umask)
        attrs['mode'] = '%04o' % (stat.S_IMODE(current.st_mode) if current else 0o666 & ~umask)
    if current is not None:
        attrs['owner'] = attrs['owner'] if attrs['owner'] is not None else str(current.st_uid)
        attrs['group'] = attrs['group'] if attrs['group'] is not None else str(current.st_gid)
    module.set_fs_attributes_if_different(attrs, False)
    if spec['validate']:
        if '%s' not in spec['validate']:
            return 'validate must contain %%s: %s' % spec['validate']
        argv = [part.replace('%s', tmp) for part in shlex.split(spec['validate'])]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            return '%s: the new content fails "%s" (rc=%d): %s' % (spec['dest'], spec['validate'], rc, (err or out).strip())
    return None


def _exit(module, specs, folders, changed_files, written, removed, diffs):
    """The result, changed_files in the order the files were given."""
    order = [spec['dest'] for spec in specs]
    created, changed_folders = folders
    module.exit_json(changed=bool(changed_files or removed or created or changed_folders),
                     created=created, changed_folders=changed_folders,
                     changed_files=sorted(changed_files, key=order.index), written=written, removed=removed, diff=diffs)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', required=True),
            owner=dict(type='str'),
            group=dict(type='str'),
            mode=dict(type='raw'),
            folders=dict(type='list', elements='raw', default=[]),
            folder_mode=dict(type='raw'),
        ),
        supports_check_mode=True,
    )
    folders, problems = folder_specs(module.params['folders'], dict(module.params, mode=module.params['folder_mode']))
    specs, absent, file_problems = _specs(module, _promised(folders))
    problems.extend(file_problems)
    befores = {}
    for spec in specs:
        problems.extend(unknown_ids(spec['dest'], spec))
        try:
            befores[spec['dest']] = _read(spec['dest'])
        except OSError as exc:
            problems.append('%s cannot be read: %s' % (spec['dest'], exc.strerror or exc))
    if problems:
        module.fail_json(msg='; '.join(problems), created=[], changed_folders=[], changed_files=[], written=[], removed=[])
    removed = [path for path in absent if os.path.lexists(path)]
    folder_changes = ensure_folders(module, folders)

    to_write, diffs = [], []
    for spec in specs:
        before = befores[spec['dest']]
        if before == spec['content']:
            continue
        to_write.append(spec)
        if module._diff and not spec['binary']:
            diffs.append({'before_header': spec['dest'], 'after_header': spec['dest'],
                          'before': '' if before is None else to_text(before, errors='surrogate_or_replace'),
                          'after': to_text(spec['content'], errors='surrogate_or_replace')})

    changed_files = [spec['dest'] for spec in to_write]
    if module.check_mode:
        for spec in specs:
            if spec not in to_write and os.path.exists(spec['dest']) \
                    and module.set_fs_attributes_if_different(fs_attrs(spec['dest'], spec), False):
                changed_files.append(spec['dest'])
        _exit(module, specs, folder_changes, changed_files, [spec['dest'] for spec in to_write], removed, diffs)

    # Every new content is staged and validated before any file is replaced.
    staged = []
    for spec in to_write:
        staged.append(spec)
        try:
            problem = _stage(module, spec)
        except (OSError, IOError) as exc:
            problem = '%s: cannot write the new content: %s' % (spec['dest'], exc)
        if problem:
            _discard(staged)
            module.fail_json(msg=problem + '; no file was changed', created=folder_changes[0],
                             changed_folders=folder_changes[1], changed_files=[], written=[], removed=[])

    # A rename within the folder replaces each file at once; the SELinux context is the one the file had,
    # or for a new file its folder's default, as atomic_move gives it.
    written = []
    try:
        for spec in staged:
            context = None
            if module.selinux_enabled():
                context = module.selinux_context(spec['dest']) if os.path.exists(spec['dest']) \
                    else module.selinux_default_context(spec['dest'])
            os.rename(spec['tmp'], spec['dest'])
            written.append(spec['dest'])
            if context is not None:
                module.set_context_if_different(spec['dest'], context, False)
    except OSError as exc:
        _discard([spec for spec in staged if spec['dest'] not in written])
        module.fail_json(msg='%s cannot be replaced: %s; written before it: %s' % (spec['dest'], exc, ', '.join(written) or 'none'),
                         created=folder_changes[0], changed_folders=folder_changes[1],
                         changed_files=written, written=written, removed=[])
    changed_files = list(written)
    for spec in specs:
        if spec['dest'] not in written and module.set_fs_attributes_if_different(fs_attrs(spec['dest'], spec), False):
            changed_files.append(spec['dest'])
    for path in removed:
        os.unlink(path)
    _exit(module, specs, folder_changes, changed_files, written, removed, diffs)


if __name__ == '__main__':
    main()
