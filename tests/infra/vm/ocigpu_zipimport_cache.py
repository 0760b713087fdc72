"""Test VMs only: keep the byte code that zipimport compiles, one file per source.

Ansible runs every module from a zip file (AnsiballZ), and zipimport compiles each of the
module's libraries from source on every task, since it cannot write byte code into the zip. Under
qemu's software emulation that compiling is about half of a task's time. This hook, loaded by a
.pth file in the test VM image (tests/infra/build-vm.sh), stores the compiled code under
/var/cache/ocigpu-zipimport, keyed by the path inside the zip and the source's SHA-256, so each
library is compiled once per VM. What a module does is unchanged: only where its code object comes
from. Nothing here is part of the collection.
"""

import hashlib
import marshal
import os
import zipimport

CACHE = '/var/cache/ocigpu-zipimport'


def install():
    compile_source = getattr(zipimport, '_compile_source', None)
    if compile_source is None or not os.path.isdir(CACHE):
        return

    def cached(pathname, source):
        inner = pathname.split('.zip' + os.sep, 1)[-1]
        key = hashlib.sha256(inner.encode() + b'\0' + source).hexdigest()
        path = os.path.join(CACHE, key)
        try:
            with open(path, 'rb') as f:
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

    zipimport._compile_source = cached


install()
