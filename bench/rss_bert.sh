#!/bin/sh
# Peak RSS of one BERT classifier training step (seq 128, batch 32 unless BATCH=), per model
# size, for est and the PyTorch peers: each contestant runs warm-up 1 + 1 timed step (the
# second step is the first with Adam's slots allocated, i.e. the steady-state peak) under
# bench/peers/maxrss.py, which prints the process's own ru_maxrss. Not a timing: the figures
# do not depend on load, so it need not run under the bench lock.
#
#   sh bench/rss_bert.sh [BUILD_DIR] [MODELS] [CONTESTANTS]
#   e.g. sh bench/rss_bert.sh build "tiny mini small base" "est-fp32 est-bf16 est-fp32-rc torch1 torch2"
#
# Contestants: est-fp32 / est-bf16 (bench_bert --precision), est-*-rc (the same with
# --recompute 1: per-layer recomputation, docs/bert.md), torch1 (bench/bert_torch.py under
# Debian's python3-torch 1.13), torch2 / torch2-bf16 (bench/peers/torch2_bert.py, eager, SDPA
# attention, under TORCH2_PY, default bench/peers/.venv/bin/python). The PyTorch rows get
# tcmalloc preloaded when TCMALLOC= names it (as bench/run_peers.sh does) and glibc otherwise.
# Prints "contestant model maxrss_MiB" lines, est's with the size of its activation buffer.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
MODELS=${2:-"tiny mini small base"}
WHO=${3:-"est-fp32 est-bf16 est-fp32-rc est-bf16-rc torch1 torch2 torch2-bf16"}
BATCH=${BATCH:-32}
TORCH2_PY=${TORCH2_PY:-$HERE/peers/.venv/bin/python}
TCMALLOC=${TCMALLOC:-}
ENV="env -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE"
[ -n "${BENCH_CORETYPE:-}" ] && ENV="$ENV OPENBLAS_CORETYPE=$BENCH_CORETYPE"
STEP="--mode train --batch $BATCH --seq 128 --warmup 1 --iters 1 --threads 2"
for model in $MODELS; do
  for who in $WHO; do
    case $who in
      est-fp32) cmd="$BUILD/bench_bert --model $model $STEP --precision fp32" ;;
      est-bf16) cmd="$BUILD/bench_bert --model $model $STEP --precision bf16" ;;
      est-fp32-rc) cmd="$BUILD/bench_bert --model $model $STEP --precision fp32 --recompute 1" ;;
      est-bf16-rc) cmd="$BUILD/bench_bert --model $model $STEP --precision bf16 --recompute 1" ;;
      torch1) cmd="/usr/bin/python3 $HERE/bert_torch.py --model $model $STEP" ;;
      torch2) cmd="$TORCH2_PY $HERE/peers/torch2_bert.py --model $model $STEP --precision fp32" ;;
      torch2-bf16) cmd="$TORCH2_PY $HERE/peers/torch2_bert.py --model $model $STEP --precision bf16" ;;
      *) echo "rss_bert.sh: unknown contestant $who" >&2; exit 2 ;;
    esac
    pre=
    case $who in torch*) [ -n "$TCMALLOC" ] && pre="LD_PRELOAD=$TCMALLOC" ;; esac
    # shellcheck disable=SC2086
    out=$($ENV $pre /usr/bin/python3 "$HERE/peers/maxrss.py" $cmd 2>&1) || { echo "$who $model FAILED: $out" >&2; continue; }
    kib=$(echo "$out" | awk '$1 == "maxrss_kib" { print $2 }')
    act=$(echo "$out" | sed -n 's/.*, \([0-9]*\) MiB activations.*/\1/p')
    printf "%-12s %-6s %8.0f %s\n" "$who" "$model" "$(awk -v k="$kib" 'BEGIN { print k / 1024 }')" \
      "${act:+(activations $act MiB)}"
  done
done
