# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state file (controller/ocigpu_control/state.py): its declared keys, and the files of the release
before (no `schema` key) read and migrated. The two files in data/ were written by the code of commit
7fa5180 (before the version key) in its own tests: state-v1-heal.json by
test_a_node_whose_replacements_fail_twice_is_left_for_a_person, state-v1-pull.json by
test_a_node_whose_pull_failed_is_handed_back_at_once_and_its_job_held_after_the_limit
(tests/unit/controller)."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from ocigpu_control import heal, state
from ocigpu_control import scaler as _autoscale
from ocigpu_control import service
from ocigpu_control import static as _autoscale_static
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    config, sim)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')


def old_file(tmp_path, name):
    path = tmp_path / 'state' / 'state.json'
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(os.path.join(DATA, name), str(path))
    with open(str(path)) as f:
        return str(path), json.load(f)


@pytest.mark.parametrize('name', ['state-v1-heal.json', 'state-v1-pull.json'])
def test_a_state_file_of_the_release_before_is_read_and_migrated(tmp_path, name):
    path, before = old_file(tmp_path, name)
    assert 'schema' not in before and set(before) <= set(state.KEYS)
    read = state.StateFile(path).read()
    assert read['schema'] == state.SCHEMA == 2
    # Every value of the old file is kept as it was; the keys it lacked are there, empty.
    assert dict((k, read[k]) for k in before) == before
    assert set(read) == set(state.KEYS)
    assert read['static_replacements'] == {} and read['released'] == []
    # The first write stores the version.
    state.StateFile(path).update(lambda s: None)
    with open(path) as f:
        assert json.load(f)['schema'] == 2


def test_the_service_goes_on_from_a_state_file_of_the_release_before(tmp_path, config):  # pylint: disable=redefined-outer-name
    path, _before = old_file(tmp_path, 'state-v1-pull.json')
    conf = dict(config, state_file=path)
    svc = service.Service(conf, None, None)
    # Job 5 had 2 failed pulls before the upgrade: the next is its third.
    assert svc._count_attempt(5, False, counter='pull_failures') == 3  # pylint: disable=protected-access
    path, _before = old_file(tmp_path / 'heal', 'state-v1-heal.json')
    assert heal.metrics_text(state.StateFile(path).read()['heal']).count('ocigpu_heal_steps_total{step="replaced"} 2') == 1


def test_a_state_file_of_a_later_release_is_read_as_it_is(tmp_path):
    path = tmp_path / 'state.json'
    path.write_text(json.dumps(dict(schema=3, released=['gpu-1'], something_new={'a': 1})))
    read = state.StateFile(str(path)).read()
    assert read['schema'] == 3 and read['released'] == ['gpu-1'] and read['something_new'] == {'a': 1}


def test_the_declared_keys_are_the_ones_the_modules_use():
    # The keys the writers' update callbacks name (state[...], state.get(...), state.setdefault(...), and
    # s for state in lambdas) in scaler, service, heal and static are all declared, with a meaning.
    used = set()
    for module in (_autoscale, service, heal, _autoscale_static):
        with open(module.__file__) as f:
            text = f.read().replace('STATE_KEY', repr(_autoscale_static.STATE_KEY))
        used |= set(re.findall(r"\b(?:state|s)(?:\[|\.get\(|\.setdefault\()'(\w+)'", text))
        used |= set(re.findall(r"\bcounter='(\w+)'", text))  # service.py: state.setdefault(counter, {})
    assert used == set(state.KEYS) - {'schema'}
    assert all(meaning for _empty, meaning in state.KEYS.values())
