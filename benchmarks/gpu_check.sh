#!/usr/bin/env bash
# Issue 38's GPU figures in one go (a few minutes), from the repository root:
#   bash benchmarks/gpu_check.sh [OUTDIR]   (default ./gpu-check-out; EPOCHS=1 REPEATS=2 COUNT_UPDATES=200 THREADS=0,
#                                            CHECK_S=540: the whole check's bound in seconds, each part cut to fit)
# 1. the CUDA agreement test (tests/test_lookahead.py::test_cuda_gives_the_cpu_weights_to_float_tolerance) and the
#    device-rule tests (tests/test_device.py), the fused CUDA step on gradients laid out otherwise than their weights
#    (tests/test_ps_apply.py), the CUDA RNG streams of a checkpoint and a CUDA run's resume (tests/test_checkpoint.py),
#    CifarNet under the default deterministic mode (tests/test_lookahead.py) and a user's BatchNorm
#    module with Adam and a scheduler through the Lightning API, both namespaces (tests/test_batchnorm.py), the loss
#    check before a run leaving the CUDA RNG (tests/test_lightning_api.py):
#    OUTDIR/cuda_tests.txt;
# 2. a flush's momentum-SGD updates as one GEMM per parameter against the optimizer's steps, on the GPU:
#    OUTDIR/flush_gemm_cuda.txt (benchmarks/bench_flush_gemm.py: what the closed form would save there);
# 3. benchmarks/bench_gpu.py --device cuda: the plain batch-120 and batch-4 loops and psbench's hardsync,
#    30-softsync, async and SSP(3) on the GPU, as ratios of the batch-120 loop, and the per-update op and
#    synchronisation counts there: OUTDIR/bench_cuda.txt and .json;
# 4. a BatchNorm ResNet in a user's LightningModule (benchmarks/bench_batchnorm.py --accelerator gpu): plain
#    Lightning at batch 64 and 8, the strategy's hardsync and async, on the GPU: OUTDIR/batchnorm_gpu.txt;
# 5. where the time of an async and a hardsync run goes on the GPU (benchmarks/profile_run.py: cProfile of the run
#    alone, torch.profiler's device-busy share): OUTDIR/profile_cuda.txt;
# 6. bench_gpu on this machine's CPU (THREADS=0: torch's default, one per core), last, where CHECK_S cuts first:
#    OUTDIR/bench_cpu.txt and .json.
# OUTDIR/log.txt says what ran, on which device, how long each part took and its exit status. Without a CUDA
# device the CUDA parts are refused in one line each and the CPU part runs.
# On a GPU machine whose Python lacks hydra/omegaconf (see the GPU README of the project's shared notes), put them
# in .devcheck/deps and the CIFAR subset in .devcheck/datasets/cifar10-subset first: both are used when present.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-$PWD/gpu-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
[ -d .devcheck/deps ] && export PYTHONPATH=$PWD/.devcheck/deps:$PYTHONPATH
[ -z "${PSBENCH_DATA:-}" ] && [ -d .devcheck/datasets ] && export PSBENCH_DATA=$PWD/.devcheck/datasets
export PSBENCH_ROOT=${PSBENCH_ROOT:-$(mktemp -d)}
EPOCHS=${EPOCHS:-1} REPEATS=${REPEATS:-2} COUNT_UPDATES=${COUNT_UPDATES:-200} THREADS=${THREADS:-0}
DEADLINE=$(( $(date +%s) + ${CHECK_S:-540} ))
log=$OUT/log.txt
{
  echo "gpu_check $(date '+%Y-%m-%d %H:%M') at $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: none"
  echo "CPUs: $(nproc)"
  $PY -c "import torch, pytorch_lightning as pl; print('torch', torch.__version__, 'lightning', pl.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
} >>"$log" 2>&1
part() {  # name, timeout (s), output file, command...: cut to the deadline, skipped past it
  local name=$1 limit=$2 file=$3; shift 3
  local t0=$(date +%s)
  [ $(( DEADLINE - t0 )) -lt "$limit" ] && limit=$(( DEADLINE - t0 ))
  [ "$limit" -gt 10 ] || { echo "$name: skipped (CHECK_S reached)" >>"$log"; return; }
  timeout "$limit" "$@" >"$file" 2>&1
  local rc=$?
  echo "$name: rc=$rc, $(( $(date +%s) - t0 )) s, $file" >>"$log"
  [ $rc = 0 ] || tail -3 "$file" | sed 's/^/    /' >>"$log"
}
part "CUDA agreement and device tests" 150 "$OUT/cuda_tests.txt" \
  $PY -m pytest -q -rs -p no:cacheprovider \
  "tests/test_lookahead.py::test_cuda_gives_the_cpu_weights_to_float_tolerance" tests/test_device.py \
  "tests/test_ps_apply.py::test_cuda_fused_steps_take_gradients_laid_out_otherwise_than_their_weights" \
  "tests/test_checkpoint.py::test_cuda_rng_streams_resume_on_a_gpu" \
  "tests/test_checkpoint.py::test_a_cuda_run_resumed_from_its_checkpoint_ends_at_the_uninterrupted_runs_loss" \
  "tests/test_lookahead.py::test_cuda_trains_cifarnet_under_the_default_deterministic_mode" \
  "tests/test_batchnorm.py::test_cuda_gives_the_cpu_weights_for_a_users_batchnorm_adam_module" \
  "tests/test_lightning_api.py::test_the_loss_check_leaves_the_rngs_of_the_cpu_and_the_modules_device_and_its_buffers"
part "bench_flush_gemm --device cuda" 60 "$OUT/flush_gemm_cuda.txt" \
  $PY benchmarks/bench_flush_gemm.py --device cuda --repeats 5 --threads 1
bench() {  # device: bench_gpu's table on it
  part "bench_gpu --device $1" 300 "$OUT/bench_$1.txt" \
    $PY benchmarks/bench_gpu.py --device "$1" --epochs "$EPOCHS" --repeats "$REPEATS" \
    --count-updates "$COUNT_UPDATES" --threads "$THREADS" --json "$OUT/bench_$1.json"
}
bench cuda
part "bench_batchnorm --accelerator gpu" 90 "$OUT/batchnorm_gpu.txt" \
  $PY benchmarks/bench_batchnorm.py --accelerator gpu --epochs 0.5 --repeats 2 --threads 0
part "profile of async and hardsync on cuda" 120 "$OUT/profile_cuda.txt" \
  $PY benchmarks/profile_run.py --device cuda --cases async,hardsync
bench cpu  # last: the GPU parts first, where CHECK_S cuts
echo DONE >>"$log"
cat "$log"
