# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the containerd_rootless templates for cases the molecule scenarios cannot reach
(containerd 2.x config format, the CRI plugin on with CDI, other settings) and check the result."""

from __future__ import annotations

import json
import pathlib
import subprocess
import tomllib

import jinja2
import pytest
import yaml

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "containerd_rootless"


def render(name, **overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True)
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))
    variables.update(
        ansible_managed="managed",
        __containerd_rootless_path="/usr/local/sbin:/usr/local/bin:/usr/bin:/bin",
        __containerd_rootless_cni_dir="/opt/cni/bin",
        __containerd_rootless_containerd_major="2",
    )
    variables.update(overrides)
    return env.get_template(name).render(**variables)


@pytest.mark.parametrize("major, version", [("1", 2), ("2", 3)])
def test_containerd_config_format_follows_the_major_version(major, version):
    config = tomllib.loads(render("config.toml.j2", __containerd_rootless_containerd_major=major))
    assert config["version"] == version
    assert config["disabled_plugins"] == ["io.containerd.grpc.v1.cri"]
    assert "plugins" not in config


@pytest.mark.parametrize("major, section", [("1", "io.containerd.grpc.v1.cri"), ("2", "io.containerd.cri.v1.runtime")])
def test_cri_on_gets_cdi_in_the_right_section(major, section):
    config = tomllib.loads(render("config.toml.j2", __containerd_rootless_containerd_major=major,
                                  containerd_rootless_disabled_plugins=[]))
    assert config["plugins"][section] == {"enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]}


def test_nerdctl_toml_parses():
    config = tomllib.loads(render("nerdctl.toml.j2", containerd_rootless_snapshotter="native"))
    assert config == {"snapshotter": "native", "cni_path": "/opt/cni/bin"}


def test_user_units_only_run_for_set_up_users():
    for unit in ("containerd.service.j2", "bypass4netnsd.service.j2"):
        text = render(unit)
        assert "ConditionPathExists=/etc/containerd-rootless/users/%u.env" in text
        assert "WantedBy=default.target" in text
    text = render("containerd.service.j2", containerd_rootless_detach_netns=True)
    assert "Environment=CONTAINERD_ROOTLESS_DETACH_NETNS=true" in text
    assert "ExecStart=/usr/local/libexec/ocigpu/containerd-rootless" in text


def test_delegation_drop_in():
    assert "Delegate=cpu cpuset io memory pids" in render("delegate.conf.j2").splitlines()


@pytest.mark.parametrize("name", ["containerd-rootless.sh.j2", "containerd-rootless-nsenter.sh.j2", "profile.sh.j2"])
def test_shell_scripts_parse(tmp_path, name):
    script = tmp_path / "script.sh"
    script.write_text(render(name))
    subprocess.run(["sh", "-n", str(script)], check=True)


def test_launcher_keeps_the_state_folder_nerdctl_looks_for():
    text = render("containerd-rootless.sh.j2")
    assert 'state="${XDG_RUNTIME_DIR}/containerd-rootless"' in text
    assert "--copy-up=/etc --copy-up=/run --copy-up=/var/lib" in text
    assert "mount --bind \"${data}\" /var/lib/containerd" in text


def test_known_checksums_are_sha256_and_cover_the_default_versions_they_claim():
    known = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__containerd_rootless_known_checksums"]
    for component, versions in known.items():
        for version, arches in versions.items():
            for arch, value in arches.items():
                assert len(value) == 64 and int(value, 16) >= 0, (component, version, arch)
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["containerd_rootless_versions"]
    # Without a user-supplied checksum only nerdctl and bypass4netns stop the default archive install.
    missing = sorted(c for c, v in defaults.items() if "amd64" not in known.get(c, {}).get(v, {}))
    assert missing == ["bypass4netns", "nerdctl"]
