# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role files' YAML, trusted as templates the way Ansible trusts a role's own files (tests only)."""
from __future__ import annotations

from ansible.template import trust_as_template


def trust(obj):
    if isinstance(obj, str):
        return trust_as_template(obj)
    if isinstance(obj, dict):
        return {k: trust(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [trust(v) for v in obj]
    return obj
