#!/usr/bin/env bash
# Assemble test stand-ins for the enroot release packages: enroot_<V>-<R>_<arch>.deb and
# enroot+caps_<V>-<R>_<arch>.deb, with the upstream file layout (bin, /etc/enroot with conf.d,
# hooks.d, /usr/share/enroot/hooks.d extra hooks), package names, dependency of +caps on enroot and
# its setcap postinst. The `enroot` inside is a small script (it answers `enroot version` and says
# it is a stand-in): the real enroot cannot be downloaded here. Writes SHA256SUMS beside them.
#
#   build-enroot-debs.sh OUTDIR [VERSION] [RELEASE] [ARCH]
set -euo pipefail
out=${1:?usage: $0 OUTDIR [VERSION] [RELEASE] [ARCH]}
ver=${2:-4.1.2}
rel=${3:-1}
arch=${4:-amd64}
command -v dpkg-deb >/dev/null || { echo "dpkg-deb is required" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
epoch=1700000000   # fixed timestamps: the same inputs give the same bytes

# enroot
r=$work/enroot
install -d "$r/DEBIAN" "$r/usr/bin" "$r/etc/enroot/enroot.conf.d" "$r/etc/enroot/hooks.d" \
  "$r/etc/enroot/environ.d" "$r/etc/enroot/mounts.d" "$r/usr/share/enroot/hooks.d" "$r/usr/lib/enroot"
cat > "$r/usr/bin/enroot" <<SH
#!/bin/sh
# Test stand-in for enroot $ver (ocigpu.cluster tests); not the real runtime.
case "\${1:-}" in
  version) echo "$ver" ;;
  *) echo "enroot test stand-in: only 'version' is implemented" >&2; exit 1 ;;
esac
SH
chmod 0755 "$r/usr/bin/enroot"
for h in enroot-mksquashovlfs enroot-aufs2ovlfs; do
  printf '#!/bin/sh\necho "%s test stand-in" >&2\nexit 1\n' "$h" > "$r/usr/bin/$h"; chmod 0755 "$r/usr/bin/$h"
done
cat > "$r/etc/enroot/enroot.conf" <<'CONF'
#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot
#ENROOT_SQUASH_OPTIONS -comp lzo -noD
CONF
printf '# Drop-ins for enroot.conf (*.conf, read in order)\n' > "$r/etc/enroot/enroot.conf.d/README"
for h in 50-slurm-pmi.sh 50-slurm-pytorch.sh 50-mig-config.sh 50-sharp.sh; do
  printf '#!/usr/bin/env bash\n# %s (test stand-in)\nexit 0\n' "$h" > "$r/usr/share/enroot/hooks.d/$h"
  chmod 0755 "$r/usr/share/enroot/hooks.d/$h"
done
cat > "$r/DEBIAN/control" <<CTL
Package: enroot
Version: $ver-$rel
Architecture: $arch
Maintainer: ocigpu.cluster tests <tests@invalid>
Depends: bash (>= 4.2)
Section: utils
Priority: optional
Description: enroot test stand-in
 Same package name, version and file layout as the upstream release; not the real enroot.
CTL
conffiles() { (cd "$1" && find etc -type f | sort | sed 's,^,/,') > "$1/DEBIAN/conffiles"; }
conffiles "$r"

# enroot+caps
c=$work/caps
install -d "$c/DEBIAN"
cat > "$c/DEBIAN/control" <<CTL
Package: enroot+caps
Version: $ver-$rel
Architecture: $arch
Maintainer: ocigpu.cluster tests <tests@invalid>
Depends: enroot (= $ver-$rel), libcap2-bin
Section: utils
Priority: optional
Description: enroot+caps test stand-in
 Grants the helper binaries their capabilities, as the upstream package does.
CTL
cat > "$c/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
case "$1" in
  configure)
    setcap cap_sys_admin+pe "$(command -v enroot-mksquashovlfs)"
    setcap cap_sys_admin,cap_mknod+pe "$(command -v enroot-aufs2ovlfs)"
    ;;
esac
exit 0
SH
chmod 0755 "$c/DEBIAN/postinst"

find "$work" -exec touch -h -d "@$epoch" {} +
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zgzip --build "$r" "$out/enroot_${ver}-${rel}_${arch}.deb" >/dev/null
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zgzip --build "$c" "$out/enroot+caps_${ver}-${rel}_${arch}.deb" >/dev/null
(cd "$out" && sha256sum "enroot_${ver}-${rel}_${arch}.deb" "enroot+caps_${ver}-${rel}_${arch}.deb" > SHA256SUMS)
cat "$out/SHA256SUMS"
