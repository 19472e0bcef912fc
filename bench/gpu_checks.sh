#!/usr/bin/env bash
# Every GPU check in one go, for a machine with a CUDA GPU (run from the repository root;
# nmt_lib's dependencies installed): the CUDA tests, torchrun (NCCL) training with CUDA graphs and
# evaluation on the toy corpus, the training benchmark at paper sizes (eager, CUDA graphs, naive)
# and the decoding benchmark. Logs and JSON go to $OUT (default gpu-out/); about 6 minutes on an H100.
# Exit status 1 if any step failed.
set -uo pipefail
fail=0
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # bench/ scripts import nmt_lib from this tree
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pytest tests/test_cuda.py tests/test_fast_paths.py tests/test_search.py -q \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -3 || fail=1
python3 -c "from nmt_lib.data import fixtures; fixtures.write_toy_wmt('$OUT/toy')"
run="--profile smoke --run-name RNNsearch-50 --data-dir $OUT/toy --out $OUT/results --no-progress
     --set train.device=cuda --set train.precision=bf16 --set train.cuda_graphs=true"
torchrun --nproc-per-node 1 -m nmt_lib train $run --set train.max_updates=30 2>&1 | tail -1 || fail=1
python3 -m nmt_lib evaluate $run 2>&1 | tail -1 || fail=1
python3 bench/bench_train.py --device cuda --shape paper --cuda-graphs --steps 6 --reps 2 \
    --json "$OUT/train_paper.json" 2>&1 | tee "$OUT/train_paper.log" | tail -10 || fail=1
python3 bench/bench_search.py --device cuda --reps 3 --json "$OUT/search.json" 2>&1 \
    | tee "$OUT/search.log" | tail -4 || fail=1
echo "gpu_checks: $([ $fail = 0 ] && echo all passed || echo SOMETHING FAILED, see $OUT)"
exit $fail
