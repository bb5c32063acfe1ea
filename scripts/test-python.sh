#!/usr/bin/env bash
# The Python package's checks (crates/propshare-py): a virtualenv under
# target/python (never system-wide), the package installed from the
# repository with one `pip install`, its pytest suite, the GR3 sweep's
# reduced grid and the example notebook. (.ci/run runs rustfmt and clippy
# on the crate after the workspace's.)
# .ci/run calls it; run it alone the same way: scripts/test-python.sh
#
# PROPSHARE_CLI: the propshare binary the tests compare with (default
# target/release/propshare, built here if missing). Ray is installed when
# pip can get it (PROPSHARE_SKIP_RAY=1: not tried); its test skips, saying
# so, when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null; then
  echo "python: need Python 3.9 or later as \`$python\` (set PYTHON)"; exit 1
fi
venv=target/python
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
py=$venv/bin/python
# Build into the workspace's target/ (one folder to cache and clean; the
# release artifacts are not shared with the workspace's: their profile hashes differ).
export CARGO_TARGET_DIR=$PWD/target
export PYO3_PYTHON=$PWD/$py
step() { echo "  python: $1 ($(( $(date +%s) - t0 )) s)"; t0=$(date +%s); }
t0=$(date +%s)
"$py" -m pip install -q --disable-pip-version-check pytest nbclient nbformat ipykernel matplotlib
"$py" -m pip install -q --disable-pip-version-check ./crates/propshare-py
step "installed the package"
if [ "${PROPSHARE_SKIP_RAY:-0}" = 1 ]; then
  echo "  python: PROPSHARE_SKIP_RAY=1: not installing ray; its test will skip"
else
  "$py" -m pip install -q --disable-pip-version-check 'ray>=2' \
    || echo "  python: note: could not install ray; its test will skip"
  step "ray"
fi

cli=${PROPSHARE_CLI:-target/release/propshare}
[ -x "$cli" ] || cargo build -q --release --bin propshare
PROPSHARE_CLI=$(realpath "$cli") "$py" -m pytest -q -p no:cacheprovider crates/propshare-py/tests
step "pytest"

"$py" scripts/sweep-gr3.py --ci --quiet --out target/sweep-gr3-ci
step "scripts/sweep-gr3.py --ci"

"$py" - <<'PY'
import nbformat
from nbclient import NotebookClient

path = "examples/propshare.ipynb"
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
print(f"  python: {path} ran top to bottom ({len(nb.cells)} cells)")
PY
step "notebook"
