#!/usr/bin/env bash
# The comparison's GPU view (nmt_lib/profiles/studies/compare-gpu.toml): RNNsearch-50 and the
# Transformer, each with its family's recipe from the CPU sweep, trained for the same minutes on one
# GPU and evaluated on newstest2014, into results/gpu/compare/ (about 8 minutes on an H100/H200).
# Run from the repository root on the GPU machine, with a pack of the `gpu` profile's data
# (`python -m nmt_lib pack --profile gpu --run RNNsearch-50 PACK`, ~45 MB, written where the data is):
#   bash bench/gpu_compare.sh PACK OUT [COMMIT]
# OUT receives compare.tgz (the results directory) and gpu_compare.log.
set -euo pipefail
pack=$1 out=$2 commit=${3:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu_compare.log"
run() {
  python3 bench/gpu_reference.py --profile nmt_lib/profiles/studies/compare-gpu.toml \
    --pack "$pack" --out "$out/compare" ${commit:+--commit "$commit"} --run "$@" \
    2>&1 | tee -a "$out/gpu_compare.log"
}
# the Transformer first: if it fails on this machine, RNNsearch-50 still trains
run Transformer-50 RNNsearch-50 || { status=1; run RNNsearch-50 || status=2; }
tar czf "$out/compare.tgz" -C "$out" compare  # what finished, also when a run failed
exit "${status:-0}"
