#!/bin/sh
# run_squad.py's model at seq 384: est (bench_bert --head squad: the SQuAD head through the
# BERT model_fn that `est run_squad` runs) against the same model in PyTorch (bench/bert_torch.py
# --head squad), training steps/s (forward with dropout, backward, clipping, AdamWeightDecay)
# and prediction examples/s (forward, start and end logits). Per (model, mode) the two
# programs alternate REPS times (which goes first alternates too) and the medians are
# printed with est/torch; the load average is printed before and after each model.
#
#   bench/run_squad_model.sh [BUILD_DIR] [THREADS] [REPS] [MODELS] [BATCH] [PYTHON] [ITERS]
#   e.g. bench/run_squad_model.sh build 2 3 "tiny mini small" 8 .venv-interop/bin/python 5
#
# ITERS timed steps per run (after one warm-up step; default 5).
#
# Environment as bench/run_bert.sh for both programs: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# unset (BENCH_CORETYPE=X sets OPENBLAS_CORETYPE=X instead), OMP_NUM_THREADS=THREADS,
# OMP_WAIT_POLICY=PASSIVE; torch also set_num_threads(THREADS). PYTHON is the interpreter
# with torch (default: the interop venv's, torch 2.4.1 from PyPI).
set -e
BLASENV="-u OPENBLAS_CORETYPE"
[ -n "$BENCH_CORETYPE" ] && BLASENV="OPENBLAS_CORETYPE=$BENCH_CORETYPE"
BUILD=${1:-build}
THREADS=${2:-2}
REPS=${3:-3}
MODELS=${4:-"tiny mini small"}
BATCH=${5:-8}
PY=${6:-.venv-interop/bin/python}
ITERS=${7:-5}
SEQ=384
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$BUILD/bench_bert" ] || { echo "run_squad_model.sh: $BUILD/bench_bert not found" >&2; exit 1; }
WORK=$(mktemp -d /tmp/squad_model.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
one() {  # one est|torch model mode: appends ex/s to $WORK/<prog>.<model>.<mode>
  set -- "$1" "$2" "$3" --model "$2" --mode "$3" --head squad --seq $SEQ --batch "$BATCH" --threads "$THREADS" \
    --iters "$ITERS" --warmup 1
  prog=$1 model=$2 mode=$3
  shift 3
  if [ "$prog" = est ]; then
    line=$(env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE "$BUILD/bench_bert" "$@")
  else
    line=$(env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE "$PY" \
      "$HERE/bert_torch.py" "$@")
  fi
  echo "  $line"
  echo "$line" | awk '{print $4}' >> "$WORK/$prog.$model.$mode"
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for model in $MODELS; do
  echo "$model: load before $(cut -d' ' -f1-3 /proc/loadavg)"
  for mode in train infer; do
    r=0
    while [ "$r" -lt "$REPS" ]; do
      if [ $((r % 2)) -eq 0 ]; then one est $model $mode; one torch $model $mode
      else one torch $model $mode; one est $model $mode; fi
      r=$((r + 1))
    done
  done
  echo "$model: load after $(cut -d' ' -f1-3 /proc/loadavg)"
done
printf "%-6s %-6s %12s %12s %8s   (seq %s, batch %s, threads %s, median of %s x %s steps, %s)\n" model mode "est ex/s" \
  "torch ex/s" est/torch $SEQ "$BATCH" "$THREADS" "$REPS" "$ITERS" "$BLASENV"
for model in $MODELS; do
  for mode in train infer; do
    e=$(median "$WORK/est.$model.$mode"); t=$(median "$WORK/torch.$model.$mode")
    printf "%-6s %-6s %12.2f %12.2f %7.2fx\n" $model $mode "$e" "$t" "$(awk -v a="$e" -v b="$t" 'BEGIN { print a / b }')"
  done
done
