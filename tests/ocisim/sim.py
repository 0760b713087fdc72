# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator: state, authentication, faults and the HTTP server wired together."""

from __future__ import annotations

import collections
import hashlib
import ipaddress
import json
import logging
import os
import subprocess
import threading

from . import (admin, auth, compute, filestorage, identity, images, imds, limits, management, network, seed,
               workrequests)
from .catalog import IMAGES, ad_count, services
from .core import DEFAULT_DURATIONS, KINDS, Clock, OciError, OcidFactory, Store, not_found, public
from .faults import Calls, Faults
from .resources import check_display_names, etag
from .web import Context, DropConnection, Router, Server

LOG = logging.getLogger("ocisim")
DEFAULT_REGION = "ap-tokyo-1"


class StateView:
    """Read access to stored resources for assertions: sim.state.instances[ocid] (API field names,
    private '_' keys included), sim.state.find('instances', displayName='x')."""

    def __init__(self, sim):
        self._sim = sim

    def __getattr__(self, kind):
        store = self._sim.store
        if kind.startswith("_") or not hasattr(store, kind):
            raise AttributeError(kind)
        store.tick()
        return getattr(store, kind)

    def find(self, kind, **fields):
        with self._sim.store.lock:
            return [public(r) for r in getattr(self, kind).values()
                    if all(r.get(k) == v for k, v in fields.items())]

    def get(self, ocid):
        """The API view of any stored resource by OCID (None if unknown)."""
        store = self._sim.store
        store.tick()
        with store.lock:
            for kind in ("instances", "vnics", "vnic_attachments", "private_ips", "subnets", "vcns",
                         "cluster_networks", "instance_pools", "instance_configurations", "compute_clusters",
                         "compute_capacity_reservations",
                         "work_requests", "compartments", "internet_gateways", "nat_gateways", "service_gateways",
                         "route_tables", "security_lists", "images", "file_systems", "mount_targets", "export_sets",
                         "exports"):
                res = getattr(store, kind).get(ocid)
                if res is not None:
                    return public(res)
        return None


class Simulator:
    """A stateful OCI API on 127.0.0.1.

    manual_clock=True (pytest): simulated time only moves with clock.advance(); False (process
    mode): real time."""

    def __init__(self, region=DEFAULT_REGION, manual_clock=True, durations=None, seed=None, verbose=False,
                 availability_domains=None, public_ip_cidr=None, local_block_hosts=1):
        self.region = region
        # Hosts per local block in one cluster network or compute cluster (see compute.host_of).
        self._base_local_block_hosts = max(1, int(local_block_hosts))
        self.verbose = verbose
        self.clock = Clock(manual=manual_clock)
        self.clock.add_listener(self._on_advance)
        self._seed = seed
        self._ad_count = availability_domains or ad_count(region)
        self.router = Router()
        for module in (network, compute, images, management, identity, workrequests, limits, filestorage):
            module.register(self.router)
        self.faults = Faults()
        self.calls = Calls()
        self.keys = auth.KeyRing()
        self.key = auth.generate_key()
        self._base_durations = dict(DEFAULT_DURATIONS, **(durations or {}))
        self.capacity = compute.Capacity(self)
        self.limits = limits.Limits(self)
        self.state = StateView(self)
        self.hooks = []
        self._hook_command = None
        self.server = None
        self._thread = None
        self.config_file = None
        self.profile = "DEFAULT"
        self.default_image = "Oracle-Linux-9.6-2025.10.23-0"
        self.default_gpu_image = "Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0"
        self.subscribed_regions = [region]
        self._public_ip_network = ipaddress.ip_network(public_ip_cidr) if public_ip_cidr else None
        self.reset()

    # ------------------------------------------------------------ lifecycle of the simulator
    def reset(self, drop_command_hook=False):
        """Fresh state: a tenancy with a user (the generated key), a ready compartment, catalogue.
        Python hooks are dropped; the --on-instance command stays unless drop_command_hook."""
        self.ocids = OcidFactory(self.region, self._seed)
        self.store = Store(self.clock, self.ocids)
        if self._public_ip_network is not None:
            self.store.public_ip_network = self._public_ip_network
        if self.clock.manual:
            self.clock.reset()
        self.durations = dict(self._base_durations)
        self.faults.clear()
        self.calls.reset()
        self.keys.clear()
        self.hooks = []
        self.hook_processes = []
        self.image_hooks = []
        if drop_command_hook:
            self._hook_command = None
        elif self._hook_command:
            self.on_instance_command(*self._hook_command)
        self.captured = collections.deque(maxlen=20)
        self.subscribed_regions = [self.region]
        prefix = "".join(c for c in self.ocids.unique()[8:12]).capitalize()
        self.availability_domains = {
            "{0}:{1}-AD-{2}".format(prefix, self.region.upper(), n + 1): self.ocids.new("availabilitydomain")
            for n in range(self._ad_count)}
        self.capacity.reset()
        self.limits.reset()
        self.local_block_hosts = self._base_local_block_hosts
        self.compute_hosts_in_root = False   # True: list_compute_hosts answers in the root compartment only
        self.services_by_id = {}
        for item in services(self.region):
            sid = self.ocids.new("service")
            self.services_by_id[sid] = dict(item, id=sid)
        for name, os_name, version, gpu, created, size in IMAGES:
            image_id = self.ocids.new("image")
            self.store.images[image_id] = {
                "id": image_id, "compartmentId": None, "displayName": name, "operatingSystem": os_name,
                "operatingSystemVersion": version, "lifecycleState": "AVAILABLE", "timeCreated": created,
                "createImageAllowed": True, "baseImageId": None, "launchMode": "NATIVE",
                "sizeInMBs": size, "billableSizeInGBs": None, "listingType": None,
                "agentFeatures": {"isMonitoringSupported": True, "isManagementSupported": True},
                "launchOptions": {"bootVolumeType": "PARAVIRTUALIZED", "firmware": "UEFI_64", "networkType": "VFIO",
                                  "remoteDataVolumeType": "PARAVIRTUALIZED", "isPvEncryptionInTransitEnabled": False,
                                  "isConsistentVolumeNamingEnabled": True},
                "freeformTags": {}, "definedTags": {}, "_tenancy": None, "_gpu": gpu,
            }
        tenancy = self.add_tenancy("ocigpu-test-tenancy", key=self.key, tenancy_id=getattr(self, "tenancy_id", None),
                                   user_id=getattr(self, "user_id", None))
        self.tenancy_id = tenancy["tenancy_id"]
        self.user_id = tenancy["user_id"]
        self.compartment_id = self.add_compartment("ocigpu-test", self.tenancy_id,
                                                   description="Compartment for tests")["id"]

    def add_tenancy(self, name, key=None, tenancy_id=None, user_id=None):
        """Register a tenancy (root compartment) with one user and API key.  Returns a dict with
        tenancy_id, user_id, key (private key object) and key_id."""
        store = self.store
        key = key or auth.generate_key()
        tenancy_id = tenancy_id or self.ocids.new("tenancy")
        user_id = user_id or self.ocids.new("user")
        now = store.stamp()
        store.tenancies[tenancy_id] = {"id": tenancy_id, "name": name, "description": name, "homeRegionKey": None,
                                       "upiIdcsCompatibilityLayerEndpoint": None, "freeformTags": {},
                                       "definedTags": {}, "_tenancy": tenancy_id}
        store.compartments[tenancy_id] = {"id": tenancy_id, "compartmentId": tenancy_id, "name": name,
                                          "description": name, "timeCreated": now, "lifecycleState": "ACTIVE",
                                          "inactiveStatus": None, "isAccessible": True, "freeformTags": {},
                                          "definedTags": {}, "_tenancy": tenancy_id, "_root": True}
        store.users[user_id] = {"id": user_id, "name": "ocigpu-test-user", "_tenancy": tenancy_id}
        key_id = self.keys.register(tenancy_id, user_id, key)
        return {"tenancy_id": tenancy_id, "user_id": user_id, "key": key, "key_id": key_id}

    def add_compartment(self, name, parent_id=None, description=None, accessible=True, freeform_tags=None,
                        defined_tags=None, tenancy=None, state="ACTIVE"):
        store = self.store
        with store.lock:
            parent_id = parent_id or self.tenancy_id
            parent = store.compartments[parent_id]
            comp_id = self.ocids.new("compartment")
            store.compartments[comp_id] = {
                "id": comp_id, "compartmentId": parent_id, "name": name, "description": description or name,
                "timeCreated": store.stamp(), "lifecycleState": state, "inactiveStatus": None,
                "isAccessible": bool(accessible), "freeformTags": dict(freeform_tags or {}),
                "definedTags": dict(defined_tags or {}), "_tenancy": tenancy or parent["_tenancy"]}
            return store.compartments[comp_id]

    def set_durations(self, **durations):
        """Change lifecycle durations (simulated seconds) for this test; keys: see core.DEFAULT_DURATIONS."""
        unknown = set(durations) - set(self.durations)
        if unknown:
            raise KeyError("unknown durations: {0}".format(", ".join(sorted(unknown))))
        self.durations.update({k: float(v) for k, v in durations.items()})

    def create_capacity_reservation(self, availability_domain, shape, count, compartment_id=None, display_name=None,
                                    fault_domain=None):
        """A compute capacity reservation of `count` hosts of `shape` in the availability domain, ACTIVE at once
        (CreateComputeCapacityReservation makes one CREATING): in the simulator's compartment unless another is
        named; its hosts leave the availability domain's on-demand capacity, and an availability domain with
        too few raises OciError 500 "Out of host capacity." as the API answers.  Returns its API view."""
        compartment_id = compartment_id or self.compartment_id
        config = {"instanceShape": shape, "reservedCount": int(count)}
        if fault_domain:
            config["faultDomain"] = fault_domain
        body = {"compartmentId": compartment_id, "availabilityDomain": availability_domain,
                "displayName": display_name, "instanceReservationConfigs": [config]}
        with self.store.lock:
            ctx = self.internal_context(self.store.tenancy_of(compartment_id), body)
            res = compute.new_reservation(ctx, ctx.body, state="ACTIVE")
            return public(res)

    def set_limit(self, limit_name, value, availability_domain=None):
        """Set a compute service limit (a shape's quotaNames entry, e.g. the GPU count of a GPU shape), or one
        of File Storage (file-system-count, mount-target-count), in
        one availability domain or in every one; GetResourceAvailability answers it less what live
        instances use.  value=None: the limit has no value (GetResourceAvailability answers 404)."""
        self.limits.set(limit_name, value, availability_domain)

    def on_instance(self, hook):
        """Register hook(event, instance, vnics): event is 'launch' when an instance is created
        (state PROVISIONING, primary VNIC already has its private IP) or 'terminate' when its
        termination starts.  instance and vnics are API views (dicts with camelCase keys)."""
        self.hooks.append(hook)
        return hook

    def spawn_hook(self, command, env, log_path=None):
        """Start a hook command in the background (its output appended to log_path); returns its process."""
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # pylint: disable=consider-using-with
        try:
            proc = subprocess.Popen(command, shell=True, env=env, stdout=out, stderr=out,  # pylint: disable=consider-using-with
                                    stdin=subprocess.DEVNULL)
        finally:
            if log_path:
                out.close()
        self.hook_processes.append(proc)
        return proc

    def on_instance_command(self, command, log_path=None):
        """Register a shell command as instance hook (process mode: --on-instance).  It runs in the
        background, not delaying the API answer, with the environment OCISIM_EVENT (launch |
        terminate), OCISIM_INSTANCE_ID, OCISIM_IMAGE_ID (the instance's image), OCISIM_DISPLAY_NAME, OCISIM_HOSTNAME, OCISIM_SHAPE,
        OCISIM_PRIVATE_IP, OCISIM_PUBLIC_IP (empty without one), OCISIM_SUBNET_CIDR, OCISIM_ENDPOINT
        and OCISIM_INSTANCE_JSON.  It is also the image hook (OCISIM_EVENT=image, see
        images.command_hook), which the image waits for."""
        self._hook_command = (command, log_path)

        def hook(event, instance, vnics):
            primary = vnics[0] if vnics else {}
            subnet = self.store.subnets.get(primary.get("subnetId") or "") or {}
            env = dict(os.environ, OCISIM_EVENT=event, OCISIM_INSTANCE_ID=instance["id"],
                       OCISIM_DISPLAY_NAME=instance["displayName"], OCISIM_HOSTNAME=primary.get("hostnameLabel") or "",
                       OCISIM_SHAPE=instance["shape"], OCISIM_PRIVATE_IP=primary.get("privateIp") or "",
                       OCISIM_PUBLIC_IP=primary.get("publicIp") or "",
                       OCISIM_SUBNET_CIDR=subnet.get("cidrBlock") or "", OCISIM_ENDPOINT=self.endpoint or "",
                       OCISIM_IMAGE_ID=instance["imageId"], OCISIM_INSTANCE_JSON=json.dumps(instance))
            self.spawn_hook(command, env, log_path)
        self.on_image(images.command_hook(self, command, log_path))
        return self.on_instance(hook)

    def on_image(self, hook):
        """Register hook(instance, image), run when CreateImage makes an image of an instance (API views, the
        image PROVISIONING).  It answers None once done, or a process (subprocess.Popen) that the image waits
        for: AVAILABLE when it exits 0; an exception or another exit status fails the work request and the
        image is DELETED (see images.py)."""
        self.image_hooks.append(hook)
        return hook

    def call_hook(self, event, instance):
        if not self.hooks:
            return
        store = self.store
        vnics = [public(store.vnics[store.vnic_attachments[a]["vnicId"]]) for a in instance["_attachments"]
                 if a in store.vnic_attachments and store.vnic_attachments[a]["vnicId"] in store.vnics]
        for hook in list(self.hooks):
            try:
                hook(event, public(instance), vnics)
            except Exception:  # pylint: disable=broad-except
                LOG.exception("instance hook failed for %s %s", event, instance["id"])

    def _on_advance(self):
        self.store.tick()

    # ------------------------------------------------------------ seeding
    def seed_instances(self, count, compartments=1, **kwargs):
        return seed.seed_instances(self, count, compartments, **kwargs)

    def seed_cluster(self, name, size, **kwargs):
        return seed.seed_cluster(self, name, size, **kwargs)

    def seed_network(self, compartment_id=None, cidr="10.0.0.0/16", **kwargs):
        """Returns (vcn, subnet) stored dicts."""
        return seed.seed_network(self, compartment_id or self.compartment_id, cidr, **kwargs)

    def seed_subnet(self, vcn_id, cidr, name="subnet", prohibit_public_ip=False, dns_label=None):
        """Another AVAILABLE subnet in a seeded VCN; returns the stored dict."""
        return seed.seed_subnet(self, vcn_id, cidr, name, prohibit_public_ip, dns_label)

    # ------------------------------------------------------------ serving
    @property
    def port(self):
        return self.server.server_address[1] if self.server else None

    @property
    def endpoint(self):
        return "http://127.0.0.1:{0}".format(self.port) if self.server else None

    def start(self, port=0):
        if self.server is None:
            self.server = Server(self, port)
            self._thread = threading.Thread(target=self.server.serve_forever, name="ocisim", daemon=True)
            self._thread.start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def write_config(self, path, profile="DEFAULT"):
        self.config_file = auth.write_config(path, profile, self.user_id, self.tenancy_id, self.region, self.key)
        self.profile = profile
        return self.config_file

    def sdk_config(self):
        """An in-memory SDK config dict for the default user."""
        return {"user": self.user_id, "tenancy": self.tenancy_id, "fingerprint": auth.fingerprint(self.key),
                "region": self.region, "key_content": auth.private_pem(self.key).decode("ascii")}

    def auth_args(self):
        """Options for the collection's modules and inventory plugin."""
        return {"config_file": self.config_file, "config_profile": self.profile, "region": self.region,
                "service_endpoint": self.endpoint}

    def client(self, client_class, **kwargs):
        """An SDK client (e.g. oci.core.ComputeClient) talking to the simulator."""
        kwargs.setdefault("service_endpoint", self.endpoint)
        return client_class(self.sdk_config(), **kwargs)

    # ------------------------------------------------------------ request handling
    def internal_context(self, tenancy, body=None):
        """A request context for calling handlers directly (seeding), as `tenancy`, with a JSON body."""
        ctx = Context(self, "POST", "", {}, {}, json.dumps(body or {}).encode("utf-8"), {})
        ctx.tenancy = tenancy
        return ctx

    def dispatch(self, method, path, raw_path, query, headers, body):
        self.store.tick()
        if path.startswith("/_imds/"):
            return imds.handle(self, method, path[len("/_imds"):], headers)
        if path.startswith("/_admin/") or path == "/_admin":
            return admin.handle(self, method, path[len("/_admin"):], query, body)
        route, params = self.router.match(method, path)
        if route is None:
            if params:
                raise OciError(405, "MethodNotAllowed", "{0} is not allowed on {1}".format(method, path))
            raise not_found("path {0}".format(path))
        self.calls.record(route.key)
        rules = self.faults.pick(route.key)
        self._apply_faults([r for r in rules if not r.after])
        tenancy, user = self.keys.verify(method, raw_path, headers, body)
        self.faults.check_rate(tenancy, route.key)
        ctx = Context(self, method, path, query, headers, body, params)
        ctx.tenancy = tenancy
        ctx.user = user
        token = headers.get("opc-retry-token") if method == "POST" else None
        if token:
            key = (tenancy, route.key, path, token)
            digest = hashlib.sha256(body).hexdigest()
            with self.store.lock:
                cached = self.store.retry_tokens.get(key)
                if cached and cached[0] > self.store.now():
                    if cached[1] != digest:
                        raise OciError(409, "Conflict",
                                       "The retry token was already used for a request with different content.")
                    return cached[2]
        if method in ("POST", "PUT") and body:
            check_display_names(ctx.body)
        with self.store.lock:
            self._check_if_match(method, params, headers)
            reply = route.handler(ctx)
            if token and 200 <= reply.status < 300:
                self.store.retry_tokens[key] = (self.store.now() + self.durations["retry_token_ttl"], digest, reply)
        self.captured.append((route.key, reply.status, reply.body))
        self._apply_faults([r for r in rules if r.after])
        return reply

    def _apply_faults(self, rules):
        for rule in rules:
            if rule.latency:
                self.faults.sleep(rule.latency)
            if rule.drop:
                raise DropConnection()
            if rule.status:
                raise rule.error()

    def _check_if_match(self, method, params, headers):
        """If-Match on a changing request must equal the resource's current etag (412 otherwise)."""
        wanted = headers.get("if-match")
        if not wanted or method == "GET" or not params:
            return
        ocid = next(iter(params.values()))
        for kind in KINDS:
            res = getattr(self.store, kind).get(ocid)
            if res is not None:
                if etag(res) != wanted:
                    raise OciError(412, "NoEtagMatch", "The resource's etag does not match the If-Match header.")
                return

    def wait_idle(self, limit=3600.0):
        """Advance the clock until no lifecycle transition is pending (manual clock only)."""
        waited = 0.0
        while waited <= limit:
            step = self.store.next_event_in()
            if step is None:
                return waited
            self.clock.advance(step)
            waited += step
        raise TimeoutError("transitions still pending after {0} simulated seconds".format(limit))
