#!/bin/sh
# Runs est's bench_bert and the PyTorch peer (bench/bert_torch.py) interleaved, for BERT-Tiny,
# BERT-Mini and BERT-Base at seq 128 batch 32, training step and inference, and prints
# examples/s of both and est/torch. Each (model, mode) pair runs ROUNDS rounds, alternating
# which program goes first, and keeps each program's best round: on a shared machine the
# best of a few is the least noisy estimate of what the code can do.
#
#   bench/run_bert.sh [BUILD_DIR] [THREADS] [ROUNDS] [MODELS]
#   e.g. bench/run_bert.sh build 2 2 "tiny mini base"
#
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are UNSET for BOTH programs (these machines set
# OPENBLAS_CORETYPE=Haswell, which halves sgemm speed; users' machines do not). Both get
# OMP_NUM_THREADS=THREADS and OMP_WAIT_POLICY=PASSIVE (the peer's best setting; est keeps
# one OpenMP pool, so passive waiting costs it little), and torch also set_num_threads.
# The peer gets tcmalloc preloaded when libtcmalloc_minimal is installed (Debian package
# libtcmalloc-minimal4), as in the performance notes: torch allocates its activations
# every step, and glibc hands big blocks back to the kernel, so every step would pay for
# page faults on fresh memory. est allocates once and needs neither.
# BENCH_CORETYPE=X sets OPENBLAS_CORETYPE=X for both instead of unsetting it (on a VM where
# OpenBLAS's own detection falls back to its SSE3 "Prescott" kernels: perf shows
# sgemm_kernel_PRESCOTT; e.g. BENCH_CORETYPE=Cooperlake), as bench/run_pretraining.sh.
set -e
BLASENV="-u OPENBLAS_CORETYPE"
[ -n "$BENCH_CORETYPE" ] && BLASENV="OPENBLAS_CORETYPE=$BENCH_CORETYPE"
BUILD=${1:-build}
THREADS=${2:-2}
ROUNDS=${3:-2}
MODELS=${4:-"tiny mini base"}
HERE=$(cd "$(dirname "$0")" && pwd)
EST="$BUILD/bench_bert"
[ -x "$EST" ] || { echo "run_bert.sh: $EST not found (build the bench_bert target)" >&2; exit 1; }
TCMALLOC=
for lib in /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4; do
  if [ -z "$TCMALLOC" ] && [ -e "$lib" ]; then TCMALLOC=$lib; fi
done
run() {  # run <est|torch> model mode -> prints ex/s
  if [ "$1" = est ]; then
    env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE \
      "$EST" --model "$2" --mode "$3" --threads "$THREADS" | awk '{print $4}'
  else
    env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE \
      ${TCMALLOC:+LD_PRELOAD=$TCMALLOC} /usr/bin/python3 "$HERE/bert_torch.py" --model "$2" --mode "$3" \
      --threads "$THREADS" | awk '{print $4}'
  fi
}
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }
printf "%-6s %-6s %12s %12s %8s   (threads %s, best of %s rounds, peer malloc: %s, %s)\n" model mode "est ex/s" \
  "torch ex/s" ratio "$THREADS" "$ROUNDS" "${TCMALLOC:-glibc}" "$BLASENV"
for model in $MODELS; do
  for mode in train infer; do
    e=0; t=0; r=0
    while [ "$r" -lt "$ROUNDS" ]; do
      if [ $((r % 2)) -eq 0 ]; then
        e=$(best "$e" "$(run est "$model" "$mode")"); t=$(best "$t" "$(run torch "$model" "$mode")")
      else
        t=$(best "$t" "$(run torch "$model" "$mode")"); e=$(best "$e" "$(run est "$model" "$mode")")
      fi
      r=$((r + 1))
    done
    printf "%-6s %-6s %12.2f %12.2f %7.2fx\n" "$model" "$mode" "$e" "$t" "$(awk -v a="$e" -v b="$t" 'BEGIN { print a / b }')"
  done
done
