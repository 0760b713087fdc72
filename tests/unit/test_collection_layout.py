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


def test_every_role_of_configure_is_skipped_only_through_its_record():
    """configure.yml skips a role when role_records finds it current: each role of the play is in
    _ocigpu_role_applies, runs only when it is in _ocigpu_roles_run, and declares what it manages
    (__<role>_record in its vars/main.yml; docs/rerun.md)."""
    play = _configure_play()
    applies = play["vars"]["_ocigpu_role_applies"]
    assert "roles" not in play, "the roles are imported in tasks (rolespec_validate: false), not listed under roles"
    imports = [task for task in play["tasks"] if "ansible.builtin.import_role" in task]
    assert len(imports) == len(play["tasks"]), "the play's tasks are the role imports only"
    names = [task["ansible.builtin.import_role"]["name"].rpartition(".")[2] for task in imports]
    assert sorted(names) == sorted(applies), "the role imports and _ocigpu_role_applies differ"
    for task, name in zip(imports, names):
        assert task.get("when") == f"'{name}' in _ocigpu_roles_run", f"{name}: when must test _ocigpu_roles_run"
        assert task.get("tags") == [name], f"{name}: its tag must be its name"
        # Ansible's per-role check is tagged always: the play checks the roles that run, in one task.
        assert task["ansible.builtin.import_role"].get("rolespec_validate") is False, f"{name}: rolespec_validate"
        record = _load(ROOT / "roles" / name / "vars" / "main.yml").get(f"__{name}_record")
        assert isinstance(record, dict) and record, f"roles/{name}/vars/main.yml declares no __{name}_record"
        unknown = set(record) - {"paths", "units", "packages", "users", "sysctls", "mounts"}
        assert not unknown, f"__{name}_record: unknown kinds {sorted(unknown)}"
    checks = [task for task in play["pre_tasks"] if "ansible.builtin.validate_argument_spec" in task]
    assert len(checks) == 1 and checks[0]["loop"] == "{{ _ocigpu_roles_run }}", "one argument check for the roles that run"
    assert checks[0]["tags"] == "always"
