#!/usr/bin/env bash
# Reproduces BENCHMARKS.md: runs every benchmark of tests/benches in turn (each rewrites
# its own section), then writes the Comparison table from their numbers
# (scripts/comparison.py).
#
#   scripts/bench.sh                 every benchmark (about an hour on a 2-core machine)
#   scripts/bench.sh cost commit     only these, then the Comparison table again
#
# Needs the test virtualenv (.venv, or FLOE_PYTHON): run scripts/test.sh once first.
set -euo pipefail
cd "$(dirname "$0")/.."
export FLOE_PYTHON="${FLOE_PYTHON:-$PWD/.venv/bin/python}"
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
  benches=(segment_decode convert commit materializer compaction cold_start cost committer_scale upsert)
fi
for bench in "${benches[@]}"; do
  echo "== cargo bench -p floe-tests --bench $bench" >&2
  cargo bench -p floe-tests --bench "$bench"
done
"$FLOE_PYTHON" scripts/comparison.py BENCHMARKS.md
