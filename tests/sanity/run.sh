#!/usr/bin/env bash
# ansible-test sanity --local on a copy of the checkout placed at ansible_collections/ocigpu/cluster.
# ansible-test wants to download a pip bootstrap script; this machine cannot, so an offline
# stand-in (get_pip shim + a pip wheel from PyPI) is put in its cache first.
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
export PATH="$VENV/bin:$PATH"

cache=$HOME/.ansible/test/cache
mkdir -p "$cache"
# The pip version ansible-test bootstraps into its venvs (24.2 for ansible-core 2.19).
pipver=$(python3 -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))' \
  | xargs -I{} grep -ohP "pip='\K[0-9.]+" {}/_internal/python_requirements.py | head -n1)
pipver=${pipver:-24.2}
shim=$cache/get_pip_${pipver//./_}.py
if [ ! -f "$shim" ]; then
  log "installing offline pip bootstrap shim for pip $pipver"
  pip download -q --no-deps -d "$cache" "pip==$pipver"
  cat > "$shim" <<PY
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pip-$pipver-py3-none-any.whl'))
from pip._internal.cli.main import main
sys.exit(main(['install', '--upgrade', '--force-reinstall'] +
              [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]))
PY
fi

# A work folder per run, so that two runs at once cannot delete each other's tree.
mkdir -p "$OCIGPU_ROOT/.build"
work=$(mktemp -d "$OCIGPU_ROOT/.build/sanity.XXXXXX")
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/ocigpu/cluster
mkdir -p "$dest"
# Only what git tracks or would track (untracked files that are not ignored): what a build ships.
(cd "$OCIGPU_ROOT" && git ls-files -z --cached --others --exclude-standard) \
  | (cd "$OCIGPU_ROOT" && rsync -a --from0 --files-from=- ./ "$dest/")
cd "$dest"
git init -q && git add -A && git -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity
ansible-test sanity --local --python 3.11 --color no "$@"

# The changelog: fragments and changelog.yaml lint-clean, and CHANGELOG.md what they generate.
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
antsibull-changelog generate
git diff --exit-code -- CHANGELOG.md || die "CHANGELOG.md is not what changelogs/changelog.yaml generates; run antsibull-changelog generate"
log "changelog: lint-clean, CHANGELOG.md up to date"
