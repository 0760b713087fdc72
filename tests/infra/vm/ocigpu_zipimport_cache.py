"""Tests only: keep the byte code that zipimport compiles, one file per source.

Ansible runs every module from a zip file (AnsiballZ), and zipimport compiles each of the
module's libraries from source on every task, since it cannot write byte code into the zip. Under
qemu's software emulation that compiling is about half of a task's time; on the test machine it is
a third of a local module call (about 0.3 s of 1 s for an OCI module against the simulator). This
hook stores the compiled code, keyed by the path inside the zip and the source's SHA-256, so each
library is compiled once. A .pth file calls install(): in the test VM image (tests/infra/build-vm.sh)
with /var/cache/ocigpu-zipimport; in the tests' virtual environment (tests/infra/venv.sh) with a folder
of the venv, for the modules the integration tests and the demos run on this machine. What
a module does is unchanged: only where its code object comes from. Nothing here is part of the
collection, and the user's install (tests/install/user-install.sh) runs without it.
"""

import hashlib
import marshal
import os
import zipimport

CACHE = '/var/cache/ocigpu-zipimport'


def install(cache=CACHE):
    """Compile through the cache folder `cache` (nothing is done where it is missing)."""
    compile_source = getattr(zipimport, '_compile_source', None)
    if compile_source is None or not os.path.isdir(cache):
        return
    # Installed once: a second install (another cache folder) replaces the first.
    compile_source = getattr(compile_source, 'ocigpu_original', compile_source)

    def cached(pathname, source):
        inner = pathname.split('.zip' + os.sep, 1)[-1]
        key = hashlib.sha256(inner.encode() + b'\0' + source).hexdigest()
        path = os.path.join(cache, key)
        try:
            with open(path, 'rb') as f:
                # The test VM's folder is every user's (1777): code is taken only from a file of root or of
                # this user that no one else may write; any other is compiled again and replaced.
                st = os.fstat(f.fileno())
                if st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022:
                    return marshal.load(f)
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = compile_source(pathname, source)
        tmp = '%s.%d' % (path, os.getpid())
        try:
            with open(tmp, 'wb') as f:
                marshal.dump(code, f)
            os.replace(tmp, path)
        except OSError:
            pass
        return code

    cached.ocigpu_original = compile_source
    zipimport._compile_source = cached
