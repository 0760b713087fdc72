# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkout's own settings hold no dead entries: an inventory that ansible.cfg names exists (else
every command from the checkout warns that it cannot parse it), and every Python package that
requirements.txt makes users install is imported by the collection's code."""

from __future__ import annotations

import configparser
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _code_imports(name):
    """Whether a file of plugins/ or roles/ imports the Python module `name`."""
    pattern = re.compile(r"^\s*(?:import|from)\s+" + re.escape(name) + r"\b", re.M)
    return any(pattern.search(path.read_text(encoding="utf-8", errors="replace"))
               for folder in ("plugins", "roles") for path in (ROOT / folder).rglob("*.py"))


def test_the_inventory_ansible_cfg_names_exists():
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "ansible.cfg", encoding="utf-8")
    sources = [s.strip() for s in config.get("defaults", "inventory", fallback="").split(",") if s.strip()]
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert not missing, f"ansible.cfg names inventory sources that do not exist: {missing}"


def test_every_requirement_is_imported():
    names = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0])
    assert names, "requirements.txt lists no package"
    unused = [n for n in names if not _code_imports(n.lower().replace("-", "_"))]
    assert not unused, f"requirements.txt makes users install packages nothing imports: {unused}"
