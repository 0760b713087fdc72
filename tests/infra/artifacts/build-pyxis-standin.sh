#!/usr/bin/env bash
# Assemble a test stand-in for the pyxis source archive (pyxis-<V>/ with a Makefile whose targets
# and prefix variable match upstream's, and a small SPANK plugin spank_pyxis.c). The plugin is
# built against the installed Slurm's spank.h and loaded by srun/slurmd like pyxis; it registers
# --container-image and says it is a stand-in: the real pyxis cannot be downloaded here. An image
# given as the absolute path of an unpacked root file system is entered with chroot (make demo runs
# a container job that way); any other image name is only recorded in the job's environment. As real
# pyxis (which runs enroot as the job's user), it refuses a container to a user whom enroot's
# permissions refuse (where enroot is installed).
# Writes the sha256 to <archive>.sha256.
#
#   build-pyxis-standin.sh OUTDIR [VERSION]
set -euo pipefail
out=${1:?usage: $0 OUTDIR [VERSION]}
ver=${2:-0.24.0}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/pyxis-$ver
mkdir -p "$src"
cat > "$src/Makefile" <<'MK'
prefix ?= /usr/local
libdir ?= $(prefix)/lib
PLUGINDIR := $(abspath $(DESTDIR)/$(libdir)/slurm)
CFLAGS := -std=gnu11 -O2 -Wall -fpic $(CFLAGS)

all: spank_pyxis.so

spank_pyxis.so: spank_pyxis.c
	$(CC) $(CFLAGS) -shared -o $@ $<

install: all
	install -d -m 755 $(PLUGINDIR)
	install -m 644 spank_pyxis.so $(PLUGINDIR)

clean:
	rm -f spank_pyxis.so

.PHONY: all install clean
MK
cat > "$src/spank_pyxis.c" <<'C'
/* Test stand-in for the pyxis SPANK plugin (ocigpu.cluster tests); not the real pyxis. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

static char image[4096];

static int opt_image(int val, const char *optarg, int remote)
{
	(void)val; (void)remote;
	snprintf(image, sizeof(image), "%s", optarg ? optarg : "");
	return 0;
}

struct spank_option spank_options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis test stand-in] record the image name in the job's environment; an absolute path to an unpacked root file system is entered with chroot",
	  1, 0, opt_image },
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	int i;
	for (i = 0; i < ac; i++)
		if (strncmp(av[i], "runtime_path=", 13) == 0 && spank_context() == S_CTX_REMOTE)
			slurm_info("pyxis-standin: runtime_path=%s", av[i] + 13);
	return 0;
}

/* Real pyxis runs enroot as the job's user: a user whom enroot's permissions refuse
 * (enroot_allowed_group) gets no container. This runs as that user (privileges dropped), before any
 * task starts. Without enroot installed (a test of pyxis alone) the image is only recorded, as before. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)sp; (void)ac; (void)av;
	if (!image[0])
		return 0;
	if (faccessat(AT_FDCWD, "/usr/bin/enroot", X_OK, AT_EACCESS) != 0 && errno != ENOENT) {
		slurm_error("pyxis-standin: this user may not run enroot (/usr/bin/enroot: %m): no container");
		return -1;
	}
	return 0;
}

/* An image given as the absolute path of an unpacked root file system (a folder) is entered the
 * simple way: the task is chrooted into it before it drops its privileges, so it runs the image's
 * programs and sees the image's files. Any other image name is only recorded. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	struct stat st;
	(void)sp; (void)ac; (void)av;
	if (image[0] != '/')
		return 0;
	if (stat(image, &st) != 0 || !S_ISDIR(st.st_mode)) {
		slurm_error("pyxis-standin: %s is not an unpacked image folder", image);
		return -1;
	}
	if (chroot(image) != 0 || chdir("/") != 0) {
		slurm_error("pyxis-standin: cannot enter %s: %m", image);
		return -1;
	}
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac; (void)av;
	if (image[0])
		spank_setenv(sp, "PYXIS_STANDIN_IMAGE", image, 1);
	return 0;
}
C
archive=$out/v$ver.tar.gz
tar --sort=name --mtime=@1700000000 --owner=0 --group=0 --numeric-owner -C "$work" -cf - "pyxis-$ver" | gzip -n > "$archive"
sha256sum "$archive" | cut -d' ' -f1 > "$archive.sha256"
cat "$archive.sha256"
