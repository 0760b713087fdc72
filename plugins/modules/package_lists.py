#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: package_lists
short_description: Refresh the apt package lists when packages are to be installed and the lists are missing or old
version_added: 0.2.0
description:
  - Tells which of O(packages) are not installed, and runs C(apt-get update) before they are installed
    when the package lists are missing or older than O(max_age). Roles call it right before their
    install task and skip that task when nothing is missing.
  - When O(packages) is given and every package is installed the module does nothing else at all, so a
    second run does no package-manager work.
  - The age is judged by the lists themselves, never by C(/var/lib/apt/periodic/update-success-stamp),
    since an image that ran C(apt-get update) and then removed C(/var/lib/apt/lists/*) has a new stamp
    and no lists. Without any C(*_Packages*) index in O(lists_dir) the module always refreshes.
  - The lists count as changed at the newest modification time of the index files and of O(lists_dir)
    itself. apt gives each downloaded file the archive's own C(Last-Modified) time, so an index file's
    time tells when the archive last changed it; the folder's time tells when apt last moved new
    lists into it on this host.
  - The lists are a cache, not state the collection manages, so the module refreshes them in check
    mode too (otherwise check mode could not tell whether the install would succeed) and always
    reports C(changed=false).
  - On a host without C(apt-get) nothing is refreshed; RV(missing) comes from C(rpm) where it is
    installed, else lists every package (none is known to be installed).
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    support: full
    details: Refreshes the package lists in check mode as well; they are a cache, not managed state.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  packages:
    description:
      - The packages the following install task installs, as it names them.
      - A name may carry an apt version pin, C(name=version). It counts as installed only when the
        installed version equals the pin or starts with it followed by C(.), C(-), C(+), C(~) or C(:)
        (C(=24.11.5) matches C(24.11.5-4), C(=24.1) does not match C(24.11.5-4)); a pin ending in
        C(*) matches every version that starts with what precedes it.
      - Empty, the module only refreshes lists that are missing or old.
    type: list
    elements: str
    default: []
  max_age:
    description: Seconds since the lists last changed after which they are refreshed. V(0) always refreshes when something is missing.
    type: int
    default: 3600
  lists_dir:
    description: apt's package lists folder. Only tests change it.
    type: path
    default: /var/lib/apt/lists
notes:
  - A package that another provides (a virtual package) is never found by C(dpkg-query) and so is
    always reported missing; the install task then runs and changes nothing.
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Refresh the package lists if missing or old, when the tools are not all installed
  ocigpu.cluster.package_lists:
    packages: [network-manager, iproute2]
  register: __lists
  when: ansible_facts['os_family'] == 'Debian'

- name: Install the tools
  ansible.builtin.package:
    name: [network-manager, iproute2]
    state: present
  when: ansible_facts['os_family'] != 'Debian' or __lists.missing | length > 0

- name: Pinned versions count as installed only when the installed version matches
  ocigpu.cluster.package_lists:
    packages: [slurmd=24.11.5-4, slurm-client=24.11.5-4]

- name: Refresh lists older than a day, whatever is installed
  ocigpu.cluster.package_lists:
    max_age: 86400
"""

RETURN = r"""
refreshed:
  description: Whether C(apt-get update) ran.
  returned: always
  type: bool
  sample: true
reason:
  description: Why the lists were or were not refreshed.
  returned: always
  type: str
  sample: no package index in /var/lib/apt/lists
missing:
  description: The entries of O(packages), as given, that are not installed (at the pinned version).
  returned: always
  type: list
  elements: str
  sample: [network-manager]
"""

import glob
import os
import time

from ansible.module_utils.basic import AnsibleModule

_ENV = {'LC_ALL': 'C', 'DEBIAN_FRONTEND': 'noninteractive'}
# What may follow a pinned version inside a longer installed one: a new version component.
_VERSION_SEPARATORS = '.-+~:'


def _split(package):
    """'name=version' -> ('name', 'version'); a name without a pin -> ('name', None)."""
    name, sep, version = package.partition('=')
    return name, (version if sep else None)


def _version_matches(installed, pin):
    if pin.endswith('*'):
        return installed.startswith(pin.rstrip('*'))
    if installed == pin:
        return True
    return installed.startswith(pin) and installed[len(pin)] in _VERSION_SEPARATORS


def _missing(packages, installed):
    """The packages (as given) whose name has no installed version matching its pin."""
    missing = []
    for package in packages:
        name, pin = _split(package)
        versions = installed.get(name, [])
        if not versions or (pin is not None and not any(_version_matches(v, pin) for v in versions)):
            missing.append(package)
    return missing


def _dpkg_installed(module, names):
    """{name: [version]} of the installed packages among names; name:arch is found as well."""
    rc, out, err = module.run_command(
        [module.get_bin_path('dpkg-query', required=True), '-W',
         '-f=${Package}\t${Architecture}\t${Status}\t${Version}\n', '--'] + names,
        environ_update=_ENV)
    if rc not in (0, 1):  # 1: some names matched no package
        module.fail_json(msg='dpkg-query failed (rc=%d): %s' % (rc, err.strip()), rc=rc, stdout=out, stderr=err)
    installed = {}
    for line in out.splitlines():
        fields = line.split('\t')
        if len(fields) != 4 or fields[2].split()[-1:] != ['installed']:
            continue  # removed with its configuration files left, half-installed, ...
        package, arch, dummy, version = fields
        for key in (package, '%s:%s' % (package, arch)):
            installed.setdefault(key, []).append(version)
    return installed


def _rpm_installed(module, rpm, names):
    installed = {}
    for name in names:
        rc, out, dummy = module.run_command([rpm, '-q', '--whatprovides', '--qf', '%{VERSION}-%{RELEASE}\n', name],
                                            environ_update=_ENV)
        if rc == 0:
            installed[name] = out.split()
    return installed


def _lists_changed(lists_dir):
    """(number of index files, newest modification time of them and of the folder)."""
    indexes = [p for p in glob.glob(os.path.join(glob.escape(lists_dir), '*_Packages*')) if os.path.isfile(p)]
    if not indexes:
        return 0, None
    return len(indexes), max(os.path.getmtime(p) for p in indexes + [lists_dir])


def decide(lists_dir, max_age, now):
    """(refresh, reason) from the lists alone."""
    count, changed = _lists_changed(lists_dir)
    if not count:
        return True, 'no package index in %s' % lists_dir
    age = int(now - changed)
    if age >= max_age:
        return True, 'the lists last changed %d s ago, not within max_age (%d s)' % (age, max_age)
    return False, 'the lists last changed %d s ago, within max_age (%d s)' % (age, max_age)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type='list', elements='str', default=[]),
            max_age=dict(type='int', default=3600),
            lists_dir=dict(type='path', default='/var/lib/apt/lists'),
        ),
        supports_check_mode=True,
    )
    packages = module.params['packages']
    max_age = module.params['max_age']
    lists_dir = module.params['lists_dir']
    if max_age < 0:
        module.fail_json(msg='max_age must be 0 or more, got %d' % max_age)
    names = sorted(set(_split(p)[0] for p in packages))

    apt_get = module.get_bin_path('apt-get')
    if not apt_get:
        rpm = module.get_bin_path('rpm')
        missing = _missing(packages, _rpm_installed(module, rpm, names)) if rpm and names else list(packages)
        module.exit_json(changed=False, refreshed=False, missing=missing,
                         reason='no apt-get on this host: nothing to refresh')

    missing = _missing(packages, _dpkg_installed(module, names)) if names else []
    if packages and not missing:
        module.exit_json(changed=False, refreshed=False, missing=[], reason='every package is installed')

    refresh, reason = decide(lists_dir, max_age, time.time())
    if refresh:
        rc, out, err = module.run_command([apt_get, 'update', '-q'], environ_update=_ENV)
        if rc != 0:
            module.fail_json(msg='apt-get update failed (rc=%d): %s' % (rc, (err or out).strip()),
                             rc=rc, stdout=out, stderr=err, missing=missing, reason=reason)
        if not _lists_changed(lists_dir)[0]:
            module.warn('apt-get update left no package index in %s: check the apt sources' % lists_dir)
    module.exit_json(changed=False, refreshed=refresh, missing=missing, reason=reason)


if __name__ == '__main__':
    main()
