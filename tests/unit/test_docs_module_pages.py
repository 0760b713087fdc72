# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-written pages name every option: docs/modules/<module>.md each option of the module's
DOCUMENTATION and of its doc fragments, and
docs/roles/<role>.md each default of roles/<role>/defaults/main.yml, whichever entry point reads it."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.name.startswith("_"))
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "defaults" / "main.yml").is_file())


def _documentation(path, name="DOCUMENTATION"):
    text = path.read_text(encoding="utf-8")
    match = re.search(r"^\s*" + name + r' = r?("""|\'\'\')(.*?)\1', text, re.S | re.M)
    assert match, f"{path.name}: no {name}"
    return yaml.safe_load(match.group(2)) or {}


def _fragment_options(fragment):
    """The options of a doc fragment of this collection, ocigpu.cluster.<file>[.<PART>], read from its file."""
    parts = fragment.split(".")
    if parts[:2] != ["ocigpu", "cluster"]:
        return {}
    path = ROOT / "plugins" / "doc_fragments" / f"{parts[2]}.py"
    return _documentation(path, parts[3] if len(parts) > 3 else "DOCUMENTATION").get("options") or {}


def _options(module):
    """The option names of a module, its doc fragments' included (what ansible-doc shows), suboptions
    as 'parent.child'."""
    doc = _documentation(ROOT / "plugins" / "modules" / f"{module}.py")
    options = {}
    for fragment in doc.get("extends_documentation_fragment") or []:
        options.update(_fragment_options(fragment))
    options.update(doc.get("options") or {})
    names = []

    def walk(level, prefix):
        for name, spec in (level or {}).items():
            names.append(prefix + name)
            walk((spec or {}).get("suboptions"), prefix + name + ".")

    walk(options, "")
    return names


def _named(text, name):
    """Whether a page names an option: the name as a whole word (in a table, a sentence or an example)."""
    return re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", text) is not None


def _missing_options(page_text, options):
    # A suboption counts when its own name appears (pages document them in the parent's row or a list).
    return [o for o in options if not _named(page_text, o.rsplit(".", 1)[-1])]


@pytest.mark.parametrize("module", MODULES)
def test_module_page_names_every_option(module):
    page = ROOT / "docs" / "modules" / f"{module}.md"
    if not page.is_file():
        pytest.skip(f"docs/modules/{module}.md is missing (test_collection_layout.py fails on that)")
    missing = _missing_options(page.read_text(encoding="utf-8"), _options(module))
    assert not missing, f"docs/modules/{module}.md does not name the options {missing} (ansible-doc ocigpu.cluster.{module})"


@pytest.mark.parametrize("role", ROLES)
def test_role_page_names_every_default(role):
    page = ROOT / "docs" / "roles" / f"{role}.md"
    assert page.is_file(), f"docs/roles/{role}.md is missing"
    with open(ROOT / "roles" / role / "defaults" / "main.yml", encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle) or {}
    text = page.read_text(encoding="utf-8")
    missing = sorted(name for name in defaults if not _named(text, name))
    assert not missing, f"docs/roles/{role}.md does not name the defaults {missing} (roles/{role}/defaults/main.yml)"


def test_the_check_sees_a_missing_name():
    """A name that only prefixes a longer one, or sits inside another word, is not named."""
    assert _named("| `gpu_placement_constraint` | x |", "gpu_placement_constraint")
    assert not _named("| `gpu_placement_constraint_x` | x |", "gpu_placement_constraint")
    assert _missing_options("`a`, `b`", ["a", "b", "c"]) == ["c"]
