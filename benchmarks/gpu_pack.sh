#!/usr/bin/env bash
# Pack, into .devcheck/ (git-ignored), what one device call on a GPU machine needs, then run it there in one go:
#   bash benchmarks/gpu_pack.sh              (here: needs the venv and the project's shared notes beside the clone)
#   bash .devcheck/run.sh OUTDIR             (there, from the checkout's root; the device tool's `carry` takes
#                                            .devcheck along: ~20 MB)
# The GPU machines seen so far have torch and pytorch-lightning but neither hydra-core, omegaconf and antlr4 nor a
# package index (the GPU README of the shared notes): these three, pure Python, are copied from the venv into
# .devcheck/deps, the 5,085-image CIFAR-10 subset into .devcheck/datasets, and the shared device-check.sh beside
# them. run.sh then runs benchmarks/gpu_check.sh (the CUDA tests, bench_flush_gemm, bench_gpu, bench_batchnorm and a
# profile on the GPU, bench_gpu on its CPU: OUTDIR/gpu_check) and device-check.sh (psbench runs with trainer.accelerator=cuda beside the same on
# the CPU: OUTDIR/device_check) within RUN_S seconds in all (default 540, under one call's 600), and prints both
# logs. Without a GPU the CUDA parts are refused in one line each and the CPU parts run.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
PY=${PYTHON:-.venv/bin/python}
[ -f "$SHARED/gpu/device-check.sh" ] || { echo "gpu_pack: $SHARED/gpu/device-check.sh not found (SHARED=…)" >&2; exit 2; }
[ -d "$SHARED/datasets/cifar10-subset" ] || { echo "gpu_pack: $SHARED/datasets/cifar10-subset not found" >&2; exit 2; }
rm -rf .devcheck
mkdir -p .devcheck/deps .devcheck/datasets
cp "$SHARED/gpu/device-check.sh" .devcheck/
SP=$("$PY" -c 'import hydra, os; print(os.path.dirname(os.path.dirname(hydra.__file__)))')
cp -r "$SP"/hydra "$SP"/omegaconf "$SP"/antlr4 "$SP"/hydra_core-*.dist-info "$SP"/omegaconf-*.dist-info \
  "$SP"/antlr4_python3_runtime-*.dist-info .devcheck/deps/
find .devcheck/deps -name __pycache__ -prune -exec rm -rf {} +
cp -r "$SHARED/datasets/cifar10-subset" .devcheck/datasets/
cat >.devcheck/run.sh <<'RUN'
#!/usr/bin/env bash
# made by benchmarks/gpu_pack.sh: both GPU checks in one call, RUN_S seconds in all (3/4 to gpu_check.sh, the rest
# to device-check.sh, whose last run is stopped at the end: psbench ends it KILLED, its summary written)
OUT=${1:?usage: bash .devcheck/run.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
END=$(( $(date +%s) + ${RUN_S:-540} ))
CHECK_S=$(( ${RUN_S:-540} * 3 / 4 )) bash benchmarks/gpu_check.sh "$OUT/gpu_check" >/dev/null 2>&1
LEFT=$(( END - $(date +%s) ))
[ $LEFT -gt 20 ] && CHECK_S=$(( LEFT * 3 / 4 )) timeout $LEFT bash .devcheck/device-check.sh "$OUT/device_check" >/dev/null 2>&1
for f in "$OUT"/gpu_check/log.txt "$OUT"/device_check/log.txt "$OUT"/device_check/results.jsonl; do
  echo "== $f"; cat "$f" 2>/dev/null
done
RUN
echo "gpu_pack: .devcheck ($(du -sh .devcheck | cut -f1)); on the GPU machine: bash .devcheck/run.sh OUTDIR"
