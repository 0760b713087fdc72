# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the nvidia_container_toolkit repository templates of both OS families (molecule runs
Debian only) and check what apt and dnf would read."""

from __future__ import annotations

import configparser
import pathlib

import jinja2
import yaml

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "nvidia_container_toolkit"


def render(name, family, arch):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    family_vars = yaml.safe_load((ROLE / "vars" / f"{family}.yml").read_text())
    variables.update(family_vars)
    variables.update(ansible_managed="managed", __nvidia_container_toolkit_arch=family_vars["__nvidia_container_toolkit_arch_map"][arch])
    return env.get_template(name).render(**variables)


def test_el_repo_file():
    parser = configparser.ConfigParser()
    parser.read_string(render("nvidia-container-toolkit.repo.j2", "RedHat", "x86_64"))
    repo = parser["nvidia-container-toolkit"]
    assert repo["baseurl"] == "https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64"
    assert repo["repo_gpgcheck"] == "1"
    assert repo["gpgkey"] == "file:///etc/pki/rpm-gpg/nvidia-container-toolkit.asc"
    assert repo["enabled"] == "1"


def test_debian_sources_file_arm64():
    fields = dict(line.split(": ", 1) for line in render("nvidia-container-toolkit.sources.j2", "Debian", "aarch64").splitlines()
                  if line and not line.startswith("#"))
    assert fields == {
        "Types": "deb",
        "URIs": "https://nvidia.github.io/libnvidia-container/stable/deb/arm64",
        "Suites": "/",
        "Signed-By": "/etc/apt/keyrings/nvidia-container-toolkit.asc",
    }


def test_apt_pin_holds_every_package_at_the_version():
    text = render("apt-preferences.j2", "Debian", "x86_64")
    assert "Pin: version 1.18.0-1" in text.splitlines()
    assert "Package: nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1" in text
