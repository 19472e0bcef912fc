#!/usr/bin/env bash
# The Multi30k testbed's study (issue 58): every model of the comparison trained to convergence on
# Multi30k En->Fr, every stage, from the repository root; rerunning resumes where it stopped
# (finished arms and runs are skipped; the others continue from their checkpoints).
#   1. the recipe sweep (studies/multi30k-recipes.toml), each arm scored on val; then search
#      settings on val for each family (results/multi30k/recipes/)
#   2. the study's profile written from them, every model trained and evaluated (results/multi30k/)
#   3. the same once Luong's best score on val is known, for its seeds 2 and 3
#   4. its tables and claims, on each Flickr test set (nmt_experiments.comparison.multi30k)
# The data: MULTI30K, the directory of Multi30k's files (nmt_lib.data.corpus; default
# data/multi30k), given to the runs as NMT_DATA so that no results file names a machine's path.
# The profile is written to a temporary file while the runs train (the tree stays as committed, so
# the manifests record a clean commit), then over studies/multi30k.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
export NMT_DATA=${MULTI30K:-data/multi30k}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
profile=$(mktemp --suffix .toml)
trap 'rm -f "$profile"' EXIT
$PY -m nmt_experiments.comparison.recipes --testbed multi30k --train --jobs "$JOBS"
[ -f results/multi30k/recipes/search.csv ] || $PY -m nmt_experiments.comparison.recipes --testbed multi30k --search
for stage in 1 2; do
  $PY -m nmt_experiments.comparison.recipes --testbed multi30k --write-profile "$profile"
  $PY -m nmt_experiments.replicate --train "$profile" --jobs "$JOBS"
done
cp "$profile" nmt_lib/profiles/studies/multi30k.toml
$PY -m nmt_experiments.comparison.multi30k
