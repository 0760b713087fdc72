# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static catalogue: regions, shapes, platform images, Oracle Services Network services."""

from __future__ import annotations

REGIONS = {
    # region name -> (region key, number of availability domains)
    "ap-tokyo-1": ("NRT", 1),
    "ap-osaka-1": ("KIX", 1),
    "us-ashburn-1": ("IAD", 3),
    "us-phoenix-1": ("PHX", 3),
    "us-chicago-1": ("ORD", 3),
    "eu-frankfurt-1": ("FRA", 3),
    "uk-london-1": ("LHR", 3),
}


def region_key(region):
    return REGIONS.get(region, (region.split("-")[1][:3].upper(), 1))[0]


def ad_count(region):
    return REGIONS.get(region, ("", 1))[1]


def _gpu(name, ocpus, memory, gpus, gpu_desc, cpu, disks, disk_gb, bandwidth, rdma_ports, vnics):
    return {
        "shape": name, "processorDescription": cpu, "ocpus": float(ocpus), "memoryInGBs": float(memory),
        "gpus": gpus, "gpuDescription": gpu_desc, "localDisks": disks,
        "localDisksTotalSizeInGBs": float(disks * disk_gb) if disks else None,
        "localDiskDescription": "{0}x {1} GB NVMe SSD".format(disks, disk_gb) if disks else None,
        "networkingBandwidthInGbps": float(bandwidth), "maxVnicAttachments": vnics,
        "isFlexible": False, "rdmaPorts": rdma_ports, "rdmaBandwidthInGbps": 100 if rdma_ports else 0,
        "isLiveMigrationSupported": False, "isBilledForStoppedInstance": True,
        "billingType": "PAID", "quotaNames": ["gpu-" + name.lower().replace(".", "-") + "-count"],
        "baselineOcpuUtilizations": None, "minTotalBaselineOcpusRequired": None,
        "isSubcore": False, "resizeCompatibleShapes": [],
        "recommendedAlternatives": [],
    }


def _flex(name, cpu, max_ocpus, max_memory, memory_per_ocpu, max_bandwidth, quota_names):
    return {
        "shape": name, "processorDescription": cpu, "ocpus": 1.0, "memoryInGBs": float(memory_per_ocpu),
        "gpus": 0, "gpuDescription": None, "localDisks": 0, "localDisksTotalSizeInGBs": None,
        "localDiskDescription": None, "networkingBandwidthInGbps": 1.0, "maxVnicAttachments": 2,
        "isFlexible": True, "rdmaPorts": 0, "rdmaBandwidthInGbps": 0, "isLiveMigrationSupported": True,
        "isBilledForStoppedInstance": False, "billingType": "PAID", "quotaNames": quota_names,
        "ocpuOptions": {"min": 1.0, "max": float(max_ocpus), "maxPerNumaNode": float(max_ocpus)},
        "memoryOptions": {"minInGBs": 1.0, "maxInGBs": float(max_memory),
                          "defaultPerOcpuInGBs": float(memory_per_ocpu), "minPerOcpuInGBs": 1.0,
                          "maxPerOcpuInGBs": 64.0},
        "networkingBandwidthOptions": {"minInGbps": 1.0, "maxInGbps": float(max_bandwidth),
                                       "defaultPerOcpuInGbps": 1.0},
        "maxVnicAttachmentOptions": {"min": 2, "max": 24.0, "defaultPerOcpu": 1.0},
        "baselineOcpuUtilizations": None, "minTotalBaselineOcpusRequired": None, "isSubcore": False,
        "resizeCompatibleShapes": [], "recommendedAlternatives": [],
    }


# Facts from the public shape documentation and the oci-hpc anchors (RDMA port counts).
SHAPES = [
    _gpu("BM.GPU3.8", 52, 768, 8, "8x NVIDIA V100 16 GB", "2.0 GHz Intel Xeon Platinum 8167M", 0, 0, 50, 0, 24),
    _gpu("BM.GPU4.8", 64, 2048, 8, "8x NVIDIA A100 40 GB", "2.6 GHz AMD EPYC 7542 (Rome)", 4, 6800, 50, 16, 2),
    _gpu("BM.GPU.A100-v2.8", 128, 2048, 8, "8x NVIDIA A100 80 GB", "2.9 GHz AMD EPYC 7J13 (Milan)",
         4, 6800, 50, 16, 2),
    # The same shape under its other name (OCI's API reference: "BM.GPU.GM4.8 (also named BM.GPU.A100-v2.8)").
    _gpu("BM.GPU.GM4.8", 128, 2048, 8, "8x NVIDIA A100 80 GB", "2.9 GHz AMD EPYC 7J13 (Milan)",
         4, 6800, 50, 16, 2),
    _gpu("BM.GPU.A10.4", 64, 1024, 4, "4x NVIDIA A10 24 GB", "2.6 GHz Intel Xeon Platinum 8358 (Ice Lake)",
         2, 3840, 100, 0, 256),
    _gpu("BM.GPU.L40S.4", 112, 1024, 4, "4x NVIDIA L40S 48 GB", "2.0 GHz Intel Xeon Platinum 8480+ (Sapphire Rapids)",
         2, 3840, 200, 2, 256),
    _gpu("BM.GPU.GB200.4", 144, 960, 4, "4x NVIDIA B200 192 GB", "NVIDIA Grace (Arm Neoverse V2)",
         4, 7680, 400, 4, 512),
    _gpu("BM.GPU.H100.8", 112, 2048, 8, "8x NVIDIA H100 80 GB", "2.0 GHz Intel Xeon Platinum 8480+ (Sapphire Rapids)",
         16, 3840, 200, 16, 2),
    _gpu("BM.GPU.H200.8", 112, 3072, 8, "8x NVIDIA H200 141 GB", "2.0 GHz Intel Xeon Platinum 8480+ (Sapphire Rapids)",
         8, 3840, 200, 8, 2),
    _gpu("VM.GPU.A10.1", 15, 240, 1, "1x NVIDIA A10 24 GB", "2.6 GHz Intel Xeon Platinum 8358 (Ice Lake)",
         0, 0, 24, 0, 15),
    _gpu("BM.GPU.B200.8", 128, 4096, 8, "8x NVIDIA B200 180 GB", "2.0 GHz Intel Xeon Platinum 8570 (Emerald Rapids)",
         8, 3840, 400, 8, 2),
    _gpu("VM.GPU.A10.2", 30, 480, 2, "2x NVIDIA A10 24 GB", "2.6 GHz Intel Xeon Platinum 8358 (Ice Lake)",
         0, 0, 48, 0, 24),
    _flex("VM.Standard.E5.Flex", "2.4 GHz AMD EPYC 9J14 (Genoa)", 94, 1049, 12, 40,
          ["standard-e5-core-count", "standard-e5-memory-count"]),
    _flex("VM.Standard.E4.Flex", "2.55 GHz AMD EPYC 7J13 (Milan)", 64, 1024, 16, 40,
          ["standard-e4-core-count", "standard-e4-memory-count"]),
    _flex("VM.Standard3.Flex", "2.6 GHz Intel Xeon Platinum 8358 (Ice Lake)", 32, 512, 16, 32,
          ["standard3-core-count", "standard3-memory-count"]),
    _flex("VM.Optimized3.Flex", "3.0 GHz Intel Xeon Gold 6354 (Ice Lake)", 18, 256, 14, 40,
          ["optimized3-core-count", "optimized3-memory-count"]),
]
SHAPES_BY_NAME = {s["shape"]: s for s in SHAPES}
GPU_SHAPES = tuple(s["shape"] for s in SHAPES if s["gpus"])

# Hosts per availability domain and shape before launches fail with "Out of host capacity.".
# Shapes not listed have no limit.
DEFAULT_CAPACITY = {"BM.GPU3.8": 16, "BM.GPU4.8": 64, "BM.GPU.A100-v2.8": 64, "BM.GPU.GM4.8": 64,
                    "BM.GPU.A10.4": 64, "BM.GPU.L40S.4": 64, "BM.GPU.H100.8": 64, "BM.GPU.H200.8": 64,
                    "BM.GPU.B200.8": 64, "BM.GPU.GB200.4": 64, "VM.GPU.A10.1": 32, "VM.GPU.A10.2": 32}

# (display name, operating system, version, gpu image, creation date, size MB)
IMAGES = [
    ("Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0", "Oracle Linux", "9", True, "2025-10-24T10:11:12.000Z", 55000),
    ("Oracle-Linux-9.5-Gen2-GPU-2025.06.17-0", "Oracle Linux", "9", True, "2025-06-18T09:00:00.000Z", 54000),
    ("Oracle-Linux-8.10-Gen2-GPU-2025.02.28-0", "Oracle Linux", "8", True, "2025-03-01T08:30:00.000Z", 52000),
    ("Oracle-Linux-9.6-2025.10.23-0", "Oracle Linux", "9", False, "2025-10-24T10:00:00.000Z", 48000),
    ("Oracle-Linux-8.10-2025.09.16-0", "Oracle Linux", "8", False, "2025-09-17T10:00:00.000Z", 47000),
    ("Canonical-Ubuntu-22.04-2025.10.31-0", "Canonical Ubuntu", "22.04", False, "2025-11-01T07:00:00.000Z", 47600),
    ("Canonical-Ubuntu-24.04-2025.10.31-0", "Canonical Ubuntu", "24.04", False, "2025-11-01T07:10:00.000Z", 47700),
    ("Canonical-Ubuntu-22.04-Gen2-GPU-2025.10.31-0", "Canonical Ubuntu", "22.04", True,
     "2025-11-01T08:00:00.000Z", 56000),
]


def services(region):
    """The Oracle Services Network services of a region (for service gateways)."""
    key = region_key(region).lower()
    return [
        {"name": "All {0} Services In Oracle Services Network".format(region_key(region)),
         "cidrBlock": "all-{0}-services-in-oracle-services-network".format(key),
         "description": "All {0} Services In Oracle Services Network".format(region_key(region))},
        {"name": "OCI {0} Object Storage".format(region_key(region)),
         "cidrBlock": "oci-{0}-objectstorage".format(key),
         "description": "OCI {0} Object Storage".format(region_key(region))},
    ]
