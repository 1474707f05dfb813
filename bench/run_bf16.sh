#!/bin/sh
# est's bf16 mixed precision against est's own fp32: bench_bert (seq 128, batch 32, the
# classifier's whole training step or inference pass) at --precision fp32 and bf16 back to
# back for each (model, mode), ROUNDS rounds alternating which goes first, best of the
# rounds kept; prints ex/s of both and bf16/fp32.
#
#   bench/run_bf16.sh [BUILD_DIR] [THREADS] [ROUNDS] [MODELS] [MODES]
#   e.g. bench/run_bf16.sh build 2 1 "small base" "train infer"
#
# Both runs get the environment `est` itself runs with: OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
# unset, OMP_NUM_THREADS=THREADS, GOMP_SPINCOUNT=1000 (tools/main.c: spin briefly at
# barriers, then sleep). ITERS overrides bench_bert's default iteration count (Base: 3
# train / 6 infer; others 20 / 50). BENCH_CORETYPE=X sets OPENBLAS_CORETYPE=X instead, as in
# bench/run_bert.sh: on a VM whose CPU OpenBLAS does not recognise it otherwise falls back to
# its SSE3 Prescott kernels, and an fp32 baseline on those makes bf16 look 2-2.6x faster
# than it is (bench/README.md, "bf16 GEMM"); e.g. BENCH_CORETYPE=Cooperlake.
set -e
BUILD=${1:-build}
THREADS=${2:-2}
ROUNDS=${3:-1}
MODELS=${4:-"small base"}
MODES=${5:-"train infer"}
EST="$BUILD/bench_bert"
[ -x "$EST" ] || { echo "run_bf16.sh: $EST not found (build the bench_bert target)" >&2; exit 1; }
run() {  # run precision model mode -> prints ex/s
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ${BENCH_CORETYPE:+OPENBLAS_CORETYPE=$BENCH_CORETYPE} \
    OMP_NUM_THREADS="$THREADS" GOMP_SPINCOUNT=1000 \
    "$EST" --model "$2" --mode "$3" --threads "$THREADS" --precision "$1" ${ITERS:+--iters "$ITERS"} |
    awk '{print $4}'
}
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
printf '| model | mode | fp32 ex/s | bf16 ex/s | bf16/fp32 |\n|---|---|---|---|---|\n'
for m in $MODELS; do
  for mode in $MODES; do
    f=0 b=0 r=0
    while [ $r -lt "$ROUNDS" ]; do
      if [ $((r % 2)) -eq 0 ]; then f=$(best "$f" "$(run fp32 "$m" "$mode")"); b=$(best "$b" "$(run bf16 "$m" "$mode")")
      else b=$(best "$b" "$(run bf16 "$m" "$mode")"); f=$(best "$f" "$(run fp32 "$m" "$mode")"); fi
      r=$((r + 1))
    done
    awk -v m="$m" -v mode="$mode" -v f="$f" -v b="$b" \
      'BEGIN { printf "| %s | %s | %.2f | %.2f | %.2fx |\n", m, mode, f, b, b / f }'
  done
done
