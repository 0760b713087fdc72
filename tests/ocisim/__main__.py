# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the simulator as a process:

    python -m tests.ocisim --port 18080 --write-config /tmp/ocisim/config

It serves on 127.0.0.1 in real time (lifecycle durations scaled by --scale), writes an OCI config
file with a generated key, and prints one JSON line: endpoint, config file, profile, region,
tenancy, compartment.  Stop it with SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from .core import DEFAULT_DURATIONS
from .sim import Simulator

PROCESS_SCALE = 0.05   # process mode: 60 s instance launch -> 3 s, 120 s cluster network -> 6 s


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m tests.ocisim", description="Run the OCI simulator on 127.0.0.1 (see docs/ocisim.md).")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--write-config", metavar="PATH", help="write an OCI config file (key next to it)")
    parser.add_argument("--write-env", metavar="PATH",
                        help="write shell exports (OCIGPU_SERVICE_ENDPOINT, OCI_CONFIG_FILE, ...) to PATH")
    parser.add_argument("--profile", default="DEFAULT")
    parser.add_argument("--region", default="ap-tokyo-1")
    parser.add_argument("--availability-domains", type=int, default=None, metavar="N",
                        help="availability domains of the region (default: as the real region has, 1 in ap-tokyo-1)")
    parser.add_argument("--scale", type=float, default=PROCESS_SCALE,
                        help="factor applied to the default lifecycle durations (default %(default)s)")
    parser.add_argument("--duration", action="append", default=[], metavar="NAME=SECONDS",
                        help="override one lifecycle duration; names: " + ", ".join(sorted(DEFAULT_DURATIONS)))
    parser.add_argument("--seed-instances", type=int, default=0, metavar="N")
    parser.add_argument("--seed-compartments", type=int, default=1, metavar="N")
    parser.add_argument("--seed-cluster", action="append", default=[], metavar="NAME:SIZE[:SHAPE]")
    parser.add_argument("--on-instance", metavar="COMMAND",
                        help="shell command run in the background when an instance is launched or terminated, "
                             "or an image is made of one "
                             "(environment OCISIM_EVENT, OCISIM_INSTANCE_ID, OCISIM_PRIVATE_IP, ...; see docs/ocisim.md)")
    parser.add_argument("--public-ip-cidr", metavar="CIDR",
                        help="network public IPs are drawn from (default 203.0.113.0/24, unreachable by design)")
    parser.add_argument("--hook-log", metavar="PATH", help="append the --on-instance command's output to PATH")
    parser.add_argument("--local-block-hosts", type=int, default=1, metavar="N",
                        help="hosts per local block in a cluster network or compute cluster (default 1)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    durations = {k: (v if k == "retry_token_ttl" else v * args.scale) for k, v in DEFAULT_DURATIONS.items()}
    for item in args.duration:
        name, _sep, value = item.partition("=")
        if name not in durations:
            raise SystemExit("unknown duration {0}".format(name))
        durations[name] = float(value)
    sim = Simulator(region=args.region, availability_domains=args.availability_domains, manual_clock=False,
                    durations=durations, verbose=args.verbose,
                    public_ip_cidr=args.public_ip_cidr, local_block_hosts=args.local_block_hosts)
    if args.seed_instances:
        sim.seed_instances(args.seed_instances, args.seed_compartments)
    for spec in args.seed_cluster:
        parts = spec.split(":")
        kwargs = {"shape": parts[2]} if len(parts) > 2 else {}
        sim.seed_cluster(parts[0], int(parts[1]), **kwargs)
    sim.start(args.port)
    if args.on_instance:
        sim.on_instance_command(args.on_instance, args.hook_log)
    if args.write_config:
        sim.write_config(args.write_config, args.profile)
    data = {"endpoint": sim.endpoint, "config_file": sim.config_file, "profile": sim.profile,
            "region": sim.region, "tenancy_id": sim.tenancy_id, "compartment_id": sim.compartment_id,
            "pid": os.getpid()}
    if args.write_env:
        with open(args.write_env, "w", encoding="utf-8") as handle:
            handle.write("export OCIGPU_SERVICE_ENDPOINT={0}\n".format(sim.endpoint))
            if sim.config_file:
                handle.write("export OCI_CONFIG_FILE={0}\nexport OCI_CONFIG_PROFILE={1}\n".format(
                    sim.config_file, sim.profile))
            handle.write("export OCIGPU_TEST_COMPARTMENT={0}\nexport OCIGPU_TEST_TENANCY={1}\n".format(
                sim.compartment_id, sim.tenancy_id))
    print(json.dumps(data), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
