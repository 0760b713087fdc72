# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The attributes of the modules that work on the host they run on (a node or the controller), not
    # through the OCI API; listed after ansible.builtin.action_common_attributes, which describes them.
    # A module's own attributes (details, facts) are added to these.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""
