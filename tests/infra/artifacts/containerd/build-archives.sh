#!/usr/bin/env bash
# Assemble release archives in the upstream layout from the binaries of Debian's packages, for the
# archive install path of the containerd_rootless role, where GitHub cannot be reached.
#
#   build-archives.sh OUTDIR
#
# Run it on a Debian 13 machine (or container) with the packages containerd, runc,
# containernetworking-plugins, rootlesskit, slirp4netns and bypass4netns installed. It writes
#   OUTDIR/<owner>/<repo>/releases/download/v<version>/<file>   the archives, as GitHub serves them,
#                                                                with each project's checksum file beside
#                                                                them, named as the project names it
#   OUTDIR/tampered/...                                          the containerd archive, one byte changed
#   OUTDIR/meta.json                                             {"versions": {...}, "checksums": {...}}
# Versions are the packages' upstream versions with "-standin" appended: the archives hold Debian's
# binaries, not the upstream builds, which this machine cannot download, and a real release's
# version would make the role's table of verified sums (rightly) refuse them. nerdctl has no Debian
# package: none is made, but bypass4netns comes in a stand-in of nerdctl's full bundle
# (bin/bypass4netns, bin/bypass4netnsd).
set -euo pipefail

out=${1:?usage: build-archives.sh OUTDIR}
arch=$(uname -m)
case $arch in
  x86_64) goarch=amd64 ;;
  aarch64) goarch=arm64 ;;
  *) echo "unsupported architecture $arch" >&2; exit 1 ;;
esac

# Upstream version of a Debian package (drop the epoch, the Debian revision and ~ds/+ suffixes), marked as a stand-in.
upstream_version() {
  echo "$(dpkg-query -W -f='${Version}' "$1" | sed -E 's/^[0-9]+://; s/[~+-].*$//')-standin"
}

bin() { command -v "$1" || { echo "missing program $1" >&2; exit 1; }; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# tarball NAME DEST_URL_PATH FILE... : pack files (NAME=path pairs) into a gzip tarball
tarball() {
  local dest=$1; shift
  local stage="$work/stage"
  rm -rf "$stage"; mkdir -p "$stage"
  local pair
  for pair in "$@"; do
    install -D -m 0755 "${pair#*=}" "$stage/${pair%%=*}"
  done
  mkdir -p "$(dirname "$out/$dest")"
  # Fixed owner and mtime: the same binaries give the same archive and checksum.
  (cd "$stage" && tar --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -cf - .) | gzip -n -1 > "$out/$dest"
}

declare -A version file
version[containerd]=$(upstream_version containerd)
version[runc]=$(upstream_version runc)
version[cni_plugins]=$(upstream_version containernetworking-plugins)
version[rootlesskit]=$(upstream_version rootlesskit)
version[slirp4netns]=$(upstream_version slirp4netns)
version[bypass4netns]=$(upstream_version bypass4netns)

v=${version[containerd]}
file[containerd]="containerd/containerd/releases/download/v$v/containerd-$v-linux-$goarch.tar.gz"
tarball "${file[containerd]}" "bin/containerd=$(bin containerd)" "bin/ctr=$(bin ctr)" \
  "bin/containerd-shim-runc-v2=$(bin containerd-shim-runc-v2)"

v=${version[runc]}
file[runc]="opencontainers/runc/releases/download/v$v/runc.$goarch"
install -D -m 0755 "$(bin runc)" "$out/${file[runc]}"

v=${version[cni_plugins]}
file[cni_plugins]="containernetworking/plugins/releases/download/v$v/cni-plugins-linux-$goarch-v$v.tgz"
cni=()
for p in /usr/lib/cni/*; do cni+=("$(basename "$p")=$p"); done
tarball "${file[cni_plugins]}" "${cni[@]}"

v=${version[rootlesskit]}
file[rootlesskit]="rootless-containers/rootlesskit/releases/download/v$v/rootlesskit-$arch.tar.gz"
tarball "${file[rootlesskit]}" "rootlesskit=$(bin rootlesskit)" "rootlessctl=$(bin rootlessctl)"

v=${version[slirp4netns]}
file[slirp4netns]="rootless-containers/slirp4netns/releases/download/v$v/slirp4netns-$arch"
install -D -m 0755 "$(bin slirp4netns)" "$out/${file[slirp4netns]}"

v=${version[bypass4netns]}
file[bypass4netns]="containerd/nerdctl/releases/download/v$v/nerdctl-full-$v-linux-$goarch.tar.gz"
tarball "${file[bypass4netns]}" "bin/bypass4netns=$(bin bypass4netns)" "bin/bypass4netnsd=$(bin bypass4netnsd)"

# Each project's checksum file, where and as the project publishes it: containerd one per archive
# (<file>.sha256sum), CNI plugins one per archive (<file>.sha256), runc one per release
# (runc.sha256sum), RootlessKit, slirp4netns and nerdctl one per release (SHA256SUMS).
sums() {  # sums CHECKSUM_FILE ARCHIVE...: the sha256sum lines of the archives, by base name
  local target=$1; shift
  (cd "$(dirname "$out/$1")" && sha256sum "${@##*/}") > "$out/$target"
}
sums "${file[containerd]}.sha256sum" "${file[containerd]}"
sums "${file[cni_plugins]}.sha256" "${file[cni_plugins]}"
sums "$(dirname "${file[runc]}")/runc.sha256sum" "${file[runc]}"
for c in rootlesskit slirp4netns bypass4netns; do
  sums "$(dirname "${file[$c]}")/SHA256SUMS" "${file[$c]}"
done

# The tampered copy: same name and path under tampered/, one byte different.
mkdir -p "$(dirname "$out/tampered/${file[containerd]}")"
cp "$out/${file[containerd]}" "$out/tampered/${file[containerd]}"
printf '\0' >> "$out/tampered/${file[containerd]}"

{
  printf '{\n  "versions": {'
  sep=""
  for c in containerd runc cni_plugins rootlesskit slirp4netns bypass4netns; do
    printf '%s\n    "%s": "%s"' "$sep" "$c" "${version[$c]}"; sep=","
  done
  printf '\n  },\n  "checksums": {'
  sep=""
  for c in containerd runc cni_plugins rootlesskit slirp4netns bypass4netns; do
    printf '%s\n    "%s": "%s"' "$sep" "$c" "$(sha256sum "$out/${file[$c]}" | cut -d' ' -f1)"; sep=","
  done
  printf '\n  }\n}\n'
} > "$out/meta.json"
cat "$out/meta.json"
