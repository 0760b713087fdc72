# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep the collection's parts in step: roles and their argument specs, docs pages, action groups."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()) if (ROOT / "roles").is_dir() else []
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.name.startswith("_"))


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


@pytest.mark.parametrize("role", ROLES)
def test_role_argument_specs_match_defaults(role):
    """Every default is declared in meta/argument_specs.yml and every declared option has a default
    or is required (dev-sec's specs drifted from their defaults; this keeps ours honest). A default may be
    declared by any entry point of the role (main, or another tasks_from such as nccl_tests' active)."""
    role_dir = ROOT / "roles" / role
    specs = _load(role_dir / "meta" / "argument_specs.yml")["argument_specs"]
    options = {}
    for entry_point in specs.values():
        options.update(entry_point.get("options") or {})
    defaults_file = role_dir / "defaults" / "main.yml"
    defaults = _load(defaults_file) if defaults_file.exists() else {}

    undeclared = sorted(set(defaults) - set(options))
    assert not undeclared, f"{role}: defaults not in argument_specs: {undeclared}"
    missing = sorted(k for k, v in options.items() if k not in defaults and not v.get("required", False))
    assert not missing, f"{role}: options with neither a default nor required: true: {missing}"
    for name in options:
        assert name.startswith(f"{role}_"), f"{role}: option {name} is not prefixed with the role name"
    for name, spec in options.items():
        if spec.get("type") == "list":
            assert "elements" in spec, f"{role}: list option {name} has no elements"


@pytest.mark.parametrize("role", ROLES)
def test_role_has_docs_page(role):
    page = ROOT / "docs" / "roles" / f"{role}.md"
    assert page.is_file(), f"docs/roles/{role}.md is missing"
    text = page.read_text(encoding="utf-8")
    options = _load(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"].get("options", {})
    undocumented = sorted(name for name in options if name not in text)
    assert not undocumented, f"docs/roles/{role}.md does not mention: {undocumented}"


def _documentation(module):
    text = (ROOT / "plugins" / "modules" / f"{module}.py").read_text(encoding="utf-8")
    match = re.search(r'^DOCUMENTATION = r?("""|\'\'\')(.*?)\1', text, re.S | re.M)
    assert match, f"{module}: no DOCUMENTATION"
    return yaml.safe_load(match.group(2))


@pytest.mark.parametrize("module", MODULES)
def test_module_has_docs_page(module):
    assert (ROOT / "docs" / "modules" / f"{module}.md").is_file(), f"docs/modules/{module}.md is missing"


def test_oci_modules_are_in_the_action_group():
    """Modules that talk to the OCI API belong to group/ocigpu.cluster.oci, so module_defaults sets
    auth once; modules that do not (node_facts) stay out of it."""
    group = set(_load(ROOT / "meta" / "runtime.yml")["action_groups"]["oci"])
    api_modules = {m for m in MODULES if "ocigpu.cluster.oci" in _documentation(m).get("extends_documentation_fragment", [])}
    assert len(api_modules) >= 7, f"expected the OCI modules to use the ocigpu.cluster.oci fragment, found {sorted(api_modules)}"
    assert api_modules == group, (f"missing from action_groups.oci: {sorted(api_modules - group)}; "
                                  f"in the group without the OCI auth options: {sorted(group - api_modules)}")
    assert group <= set(MODULES), f"action_groups.oci lists modules that do not exist: {sorted(group - set(MODULES))}"


def test_docs_links_resolve():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_reachable_from_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = {(ROOT / "docs" / t).resolve() for t in re.findall(r"\]\(([^)#\s]+)", index) if "://" not in t}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md") if p.name != "index.md"}
    orphans = sorted(str(p.relative_to(ROOT)) for p in pages - linked)
    assert not orphans, f"pages not linked from docs/index.md: {orphans}"


def _configure_play():
    plays = _load(ROOT / "playbooks" / "configure.yml")
    return next(p for p in plays if p.get("name") == "Configure the cluster's hosts")


def test_every_role_of_configure_is_included_from_data_and_declares_what_it_manages():
    """configure.yml runs its roles from one table: the play's only task includes, in the order of
    _ocigpu_role_applies, the roles that run, each only where it is in _ocigpu_roles_run; each role
    has its own tag and declares what it manages (__<role>_manages in its vars/main.yml), which the
    tasks read and role_records records (docs/rerun.md, docs/adding-a-role.md)."""
    play = _configure_play()
    applies = play["vars"]["_ocigpu_role_applies"]
    assert "roles" not in play, "the roles are included in tasks (rolespec_validate: false), not listed under roles"
    assert len(play["tasks"]) == 1, "the play's tasks are one include of the roles"
    task = play["tasks"][0]
    include = task["ansible.builtin.include_role"]
    assert include["name"] == "ocigpu.cluster.{{ __ocigpu_role }}"
    assert include.get("rolespec_validate") is False and include.get("public") is True
    assert include["apply"] == {"when": "__ocigpu_role in _ocigpu_roles_run"}
    assert task["loop_control"]["loop_var"] == "__ocigpu_role"
    assert "_ocigpu_role_applies.keys()" in task["loop"], "the roles run in the order of _ocigpu_role_applies"
    assert task["tags"] == "always"
    roles_dir = ROOT / "roles"
    assert sorted(applies) == sorted(p.name for p in roles_dir.iterdir() if (p / "tasks" / "main.yml").exists() and p.name != "nccl_tests"), \
        "every role but nccl_tests (validate.yml) is in _ocigpu_role_applies"
    for name in applies:
        role_vars = _load(roles_dir / name / "vars" / "main.yml")
        assert f"__{name}_record" not in role_vars, f"{name}: __{name}_record is now __{name}_manages"
        manages = role_vars.get(f"__{name}_manages")
        assert isinstance(manages, dict) and manages, f"roles/{name}/vars/main.yml declares no __{name}_manages"
        tasks_text = "".join(p.read_text() for p in (roles_dir / name / "tasks").glob("*.yml"))
        assert f"__{name}_manages" in tasks_text, f"{name}: its tasks do not read __{name}_manages"
        # Ports for the firewall role are declared there too; a <role>_firewall_ports default is the
        # user's setting of what the declaration holds.
        defaults = _load(roles_dir / name / "defaults" / "main.yml") or {}
        if f"{name}_firewall_ports" in defaults:
            assert f"{name}_firewall_ports" in str(manages.get("firewall_ports")), \
                f"{name}: {name}_firewall_ports is not what __{name}_manages.firewall_ports declares"
        # Each role's tasks carry its name as a tag, so --tags <role> selects them.
        main = _load(roles_dir / name / "tasks" / "main.yml")
        untagged = [t.get("name") for t in main if name not in (t.get("tags") or [])]
        assert not untagged, f"roles/{name}/tasks/main.yml: tasks without the tag {name}: {untagged}"
    firewall = (roles_dir / "firewall" / "tasks" / "zones.yml").read_text()
    assert "'^__.+_manages$'" in firewall and "_firewall_ports$" not in firewall, \
        "the firewall opens the ports of the declarations, not of variables found by their names"
    checks = [task for task in play["pre_tasks"] if "ansible.builtin.validate_argument_spec" in task]
    assert len(checks) == 1 and checks[0]["loop"] == "{{ _ocigpu_roles_run }}", "one argument check for the roles that run"
    assert checks[0]["tags"] == "always"
