#!/usr/bin/env bash
# The tree a device call carries (docs/DEVICE.md): HEAD as committed, without what the GPU
# machine does not run (benchmarks/results, docs, tests: the 64 MiB a call may carry), plus
# the wheels in .whl, into .frozen (ignored by git; name it in `carry`).
#   bash benchmarks/freeze.sh                              # .frozen from HEAD and .whl
#   bash benchmarks/freeze.sh KEPT_DIR [STORE.db]          # and KEPT_DIR/*.py in .frozen/kept,
#                                                          # STORE.db as .frozen/resume.db
# Then, e.g.: run `cd .frozen && KEPT=kept bash benchmarks/scan_values_gpu.sh` carrying [".frozen"].
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .whl ] || { echo "freeze.sh: .whl is missing: download the wheels first (docs/DEVICE.md)" >&2; exit 2; }
grep -qx '/.frozen/' .git/info/exclude 2>/dev/null || echo '/.frozen/' >> .git/info/exclude
rm -rf .frozen && mkdir .frozen
git archive HEAD | tar -x -C .frozen
rm -rf .frozen/benchmarks/results .frozen/docs .frozen/tests
cp -r .whl .frozen/.whl
if [ -n "${1:-}" ]; then mkdir -p .frozen/kept && cp "$1"/*.py .frozen/kept/; fi
if [ -n "${2:-}" ]; then cp "$2" .frozen/resume.db; fi
echo "$(git rev-parse --short HEAD)" > .frozen/COMMIT
du -sh .frozen | awk '{print ".frozen: " $1 " (a call carries at most 64 MiB)"}'
