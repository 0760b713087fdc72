# shellcheck shell=bash disable=SC2034
# Shared start of the device scripts that run playbooks on a lent GPU machine (sourced, not run).
# Needs, carried with the working tree: .whl/ (ansible-core 2.19 and the wheels it lacks there) and
# .nccl-src/v<version>.tar.gz (the nccl-tests source archive the role checks by sha256).
# Sets OUT (results), NGPU, IFACE, VERSION and writes /tmp/inventory.yml (localhost, connection local).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): the lent machines require it.
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LANG=C.UTF-8 LC_ALL=C.UTF-8 PYTHONUNBUFFERED=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
VERSION=2.19.6

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/ac/ansible_collections/ocigpu
ln -sfn "$PWD" /tmp/ac/ansible_collections/ocigpu/cluster
export ANSIBLE_COLLECTIONS_PATH=/tmp/ac

NGPU=$(nvidia-smi -L | grep -c '^GPU ')
# The H200 shape's NCCL_SOCKET_IFNAME=eth0 names OCI's front NIC; use this machine's first up NIC.
IFACE=$(for d in /sys/class/net/*; do n=${d##*/}; [ "$n" != lo ] && [ "$(cat "$d/operstate")" = up ] && echo "$n" && break; done)
IFACE=${IFACE:-lo}
{
  echo "== nvidia-smi"; nvidia-smi -L; nvidia-smi topo -m
  echo "== nvcc"; command -v nvcc || ls /usr/local/cuda/bin/nvcc; /usr/local/cuda/bin/nvcc --version | tail -2
  echo "== nccl"; ldconfig -p | grep libnccl
  echo "== mpi"; command -v mpicc mpirun; mpirun --version 2>&1 | head -1
  echo "== python $(python3 --version) ansible $(python3 -m ansible --version 2>&1 | head -1)"
  echo "== gpus $NGPU iface $IFACE"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

cat > /tmp/inventory.yml <<INVENTORY
all:
  hosts:
    localhost:
      ansible_connection: local
      ansible_become: false
      ansible_python_interpreter: $(command -v python3)
INVENTORY

# The role's options for this machine: the shape's sizes and gate table, the GPUs it has, the archive
# carried with the tree, no RDMA devices or NVMe scratch, sm_90 (H100, H200).
role_args=(-e validate_hosts=localhost -e validate_node_facts=false
  -e nccl_tests_shape=BM.GPU.H200.8 -e "nccl_tests_gpu_count=$NGPU"
  -e nccl_tests_archive_src="$PWD/.nccl-src/v$VERSION.tar.gz" -e nccl_tests_install_dir=/opt/nccl-tests
  -e '{"nccl_tests_health_hcas": []}' -e nccl_tests_scratch_path=
  -e 'nccl_tests_nvcc_gencode=-gencode=arch=compute_90,code=sm_90' -e nccl_tests_build_jobs=32
  -e "{\"nccl_tests_env\": {\"NCCL_NVLS_ENABLE\": \"0\", \"NCCL_SOCKET_IFNAME\": \"$IFACE\"}}")
