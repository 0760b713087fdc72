# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  config_file:
    description:
      - Path of the OCI SDK/CLI configuration file used with O(auth_type=api_key) and O(auth_type=security_token).
      - Defaults to C(~/.oci/config) when neither this option nor the environment variable is set.
      - The environment variable E(OCI_CONFIG_FILE) is used if the option is not set.
    type: path
  config_profile:
    description:
      - Profile of O(config_file) to use. Defaults to C(DEFAULT).
      - The environment variable E(OCI_CONFIG_PROFILE) is used if the option is not set.
    type: str
  auth_type:
    description:
      - How to authenticate.
      - V(api_key) signs requests with the user's API key named in the profile.
      - V(instance_principal) uses the identity of the OCI instance the task runs on (a dynamic group must allow it).
      - V(security_token) uses the session token of C(oci session authenticate), named by C(security_token_file) in the profile.
      - The environment variable E(OCI_ANSIBLE_AUTH_TYPE) is used if the option is not set.
    type: str
    choices: [api_key, instance_principal, security_token]
    default: api_key
  region:
    description:
      - OCI region identifier, for example C(ap-tokyo-1). Overrides the region of the profile.
      - The environment variable E(OCI_REGION) is used if the option is not set.
    type: str
  service_endpoint:
    description:
      - Base URL of the OCI API to talk to instead of the region's public endpoint, for example a
        dedicated region, an OCI simulator (C(http://127.0.0.1:8700)) or a proxy.
      - The environment variable E(OCIGPU_SERVICE_ENDPOINT) is used if the option is not set.
    type: str
  api_retries:
    description:
      - Attempts per API call (lists are retried page by page) on server errors (5xx except 501),
        busy resources (409) and connection failures, with capped exponential backoff and jitter.
        Creates carry one C(opc-retry-token) across attempts, so a retried create never makes a
        second resource. A throttled answer (HTTP 429) uses up no attempt; the call waits out a
        jittered pause of its operation and is tried again within O(api_retry_max_seconds).
    type: int
    default: 8
  api_retry_max_seconds:
    description: Upper bound in seconds for the time spent retrying one API call.
    type: int
    default: 600
requirements:
  - python >= 3.9
  - oci >= 2.150.0
notes:
  - Set these options once for a play with C(module_defaults) and the action group C(group/ocigpu.cluster.oci).
"""

    # The attributes every OCI module shares; a module states only where it differs.
    ATTRIBUTES = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  action_group:
    description: Use C(group/ocigpu.cluster.oci) in C(module_defaults) to set defaults for this module.
    support: full
    membership: [ocigpu.cluster.oci]
"""

    # PLANNED and READ_ONLY add to ATTRIBUTES: list them before it, since of two fragments that set the
    # same key the one listed first is kept (and a module's own attributes over both).

    # For modules whose inputs may be OCIDs of resources a play has yet to create.
    PLANNED = r"""
attributes:
  check_mode:
    details:
      - OCIDs that earlier tasks would only create are null in check mode; they are accepted, so a C(--check) run
        of a whole provisioning play on an empty compartment predicts every resource.
"""

    # For modules that only read; a module's own check_mode details replace these.
    READ_ONLY = r"""
attributes:
  check_mode:
    details: The module only reads.
  diff_mode:
    support: none
"""

    WAIT = r"""
options:
  wait:
    description:
      - Wait until the resource reaches its final lifecycle state (or the work request ends) before returning.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true). On timeout the task fails and reports the last lifecycle
        state and work request percentage seen.
    type: int
    default: 1200
"""

    TAGS = r"""
options:
  cluster_name:
    description:
      - Name of the cluster the resource belongs to. Written as the freeform tag C(ocigpu-cluster)
        and used, with O(compartment_id) and the display name, to find the resource again, so a
        re-run adopts what exists instead of creating a second one.
      - Must not be empty (an empty tag value would find every untagged resource's twin), and at most
        256 characters, OCI's limit on a tag value. Display names made of it must fit OCI's 255 characters.
    type: str
    required: true
  compartment_id:
    description:
      - OCID of the compartment that holds the resource - a compartment's (C(ocid1.compartment...)) or the tenancy's,
        its root compartment (C(ocid1.tenancy...)). Any other OCID, or a name, is refused before any call to OCI.
    type: str
    required: true
  freeform_tags:
    description: Extra freeform tags. The C(ocigpu-cluster) tag is always added.
    type: dict
    default: {}
  defined_tags:
    description: "Defined tags, as C({namespace: {key: value}})."
    type: dict
    default: {}
"""

    LAUNCH = r"""
options:
  shape:
    description:
      - Compute shape, for example C(BM.GPU4.8) or C(VM.Standard.E5.Flex). Required with O(state=present).
      - GPU shapes must be known to the collection's shape table (see the C(ocigpu.cluster.shape_facts) filter).
    type: str
  shape_config:
    description:
      - OCPUs and memory of a Flex shape (required for Flex shapes, refused for fixed ones).
      - Checked before anything is created against the limits OCI lists for the shape in the availability
        domain (ListShapes) - OCPUs, memory, memory per OCPU.
    type: dict
    suboptions:
      ocpus:
        description: OCPUs.
        type: float
      memory_in_gbs:
        description: Memory in GB.
        type: float
  image_id:
    description:
      - Image OCID (C(ocid1.image...); any other is refused before any call to OCI). One of O(image_id), O(image_name)
        or O(image_os) is required with O(state=present).
    type: str
  image_name:
    description:
      - Exact display name of the image, for example C(Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0).
      - An image given by O(image_name) or O(image_id) must run on O(shape) (a GPU image does not run on a Flex
        CPU shape); the module asks OCI before anything is created.
    type: str
  image_os:
    description: Operating system (for example C(Oracle Linux)); the newest available image of it that runs on O(shape) is used.
    type: str
  image_os_version:
    description: Operating system version to go with O(image_os), for example C(9).
    type: str
  subnet_id:
    description:
      - Subnet of the primary VNIC. Required with O(state=present).
      - The OCID of a subnet (C(ocid1.subnet...)) that exists and, if it is AD-specific, lies in
        O(availability_domain); checked before anything is created (the OCID's form, a VCN's for example, before any call).
    type: str
  assign_public_ip:
    description:
      - Give the primary VNIC a public IP. Refused before anything is created when the subnet prohibits public
        IPs on VNICs (a private subnet).
    type: bool
    default: false
  ssh_authorized_keys:
    description: OpenSSH public keys for the default user; each is checked before any API call.
    type: list
    elements: str
    default: []
  user_data:
    description: cloud-init user data as text. The module base64-encodes it.
    type: str
  user_data_file:
    description: File with cloud-init user data. The module base64-encodes it.
    type: path
  boot_volume_size_gb:
    description: Boot volume size in GB (50 to 32768). Defaults to 200 for GPU shapes and to the image's size otherwise.
    type: int
  availability_domain:
    description:
      - Availability domain. Defaults to the first one of the compartment.
      - Must be one of the region's (ListAvailabilityDomains); one of another region is refused before anything
        is created, and before any call when its name holds another region's identifier (C(Abcd:EU-FRANKFURT-1-AD-1)
        with region C(ap-tokyo-1)). The names in the oldest regions (C(Abcd:PHX-AD-1), C(Abcd:US-ASHBURN-AD-1)) hold
        none, so their region is known only from the list.
    type: str
  fault_domain:
    description: Fault domain - C(FAULT-DOMAIN-1), C(FAULT-DOMAIN-2) or C(FAULT-DOMAIN-3).
    type: str
  compute_cluster_id:
    description:
      - Compute cluster to join (see M(ocigpu.cluster.compute_cluster)), its OCID (C(ocid1.computecluster...); any
        other is refused before any call to OCI).
    type: str
"""
