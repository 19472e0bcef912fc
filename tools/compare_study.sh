#!/usr/bin/env bash
# The comparison study of the book's part "Before and after the paper", every stage, from the
# repository root; rerunning resumes where it stopped (finished arms and runs are skipped, on a
# fresh clone of their committed results too; the others continue from their checkpoints). About twenty hours on 2 cores (chapter 13 gives what it
# took).
#   1. the recipe sweep, each arm scored on dev; then search settings on dev for each family
#   2. the comparison's profile written from them, every model trained and evaluated
#   3. the same once Luong's best score on dev is known, for its seeds 2 and 3; then the tables
# The profile is written to a temporary file while the runs train (the tree stays as committed, so
# the manifests record a clean commit), then over studies/compare.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
profile=$(mktemp --suffix .toml)
trap 'rm -f "$profile"' EXIT
$PY -m nmt_experiments.comparison.recipes --train --jobs "$JOBS"
[ -f results/compare/recipes/search.csv ] || $PY -m nmt_experiments.comparison.recipes --search
for stage in 1 2; do
  $PY -m nmt_experiments.comparison.recipes --write-profile "$profile"
  $PY -m nmt_experiments.replicate --train "$profile" --jobs "$JOBS"
done
cp "$profile" nmt_lib/profiles/studies/compare.toml
$PY -m nmt_experiments.comparison
