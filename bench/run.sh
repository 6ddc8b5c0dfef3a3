#!/usr/bin/env bash
# oomlint's benchmark against ruff: builds the release binary, then runs bench/bench.py.
#
#   bench/run.sh            full run: 4000 generated files + 5 PyPI packages, 5 rounds (~10 min on 2 cores)
#   bench/run.sh --quick    short run: 600 generated files, timm + lightning, 2 rounds (~2 min)
#   bench/run.sh --help     every option (--files N, --rounds N, --packages, --no-pypi, ...)
#
# Everything it makes lives under target/bench/ (corpus, venv with ruff, wheels, results):
# the benchmark's folder holds only scripts. The summary is printed at the end and written
# to target/bench/summary.md; raw numbers go to target/bench/results.json.
# Numbers come from this benchmark only; nothing here asserts a time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

build=1
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;  # use the binary already in target/release (for hacking on the script)
    -h|--help) exec python3 "$here/bench.py" --help ;;
  esac
done

python3 - <<'EOF'
import sys
if sys.version_info < (3, 8):
    sys.exit(f"bench needs Python 3.8 or newer, found {sys.version.split()[0]}")
EOF

if [[ $build == 1 ]]; then
  echo "== cargo build --release"
  cargo build --release
fi
if [[ ! -x target/release/oomlint ]]; then
  echo "target/release/oomlint is missing: run cargo build --release" >&2
  exit 1
fi

export BENCH_CMDLINE="bench/run.sh${*:+ $*}"
exec python3 "$here/bench.py" "$@"
