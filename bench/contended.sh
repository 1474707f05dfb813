#!/bin/sh
# est training on a shared machine: BERT-Tiny (data/bert_config.json, as `make demo`) trained
# for one epoch on the first 1920 SST-2 sentences (60 steps of 32, seq 64), whole process
# timed, with --num_threads=1 and 2, side by side in three settings:
#   quiet      nothing else started by this script
#   neighbour  a busy-loop process in ANOTHER session (setsid: its own scheduler autogroup,
#              so the kernel gives est one core's share while est still sees every CPU, as a
#              container CPU quota would)
#   pinned     the same busy loop pinned to the last CPU (taskset)
# Each cell is the best of ROUNDS runs (seconds, lower is better); on a machine shared with
# other people "quiet" is only as quiet as they let it be, so read the rows side by side.
#
#   bench/contended.sh [EST] [ROUNDS]          e.g. bench/contended.sh build/est 2
#   EST_ENV="OMP_WAIT_POLICY=PASSIVE" bench/contended.sh    extra environment for est
#
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for est (these machines set them; users'
# machines do not).
set -eu
EST=${1:-build/est}
ROUNDS=${2:-2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$EST" ] || { echo "contended.sh: $EST not found (run make)" >&2; exit 1; }
WORK=$(mktemp -d)
NEIGHBOUR=
cleanup() {
  if [ -n "$NEIGHBOUR" ]; then kill "$NEIGHBOUR" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/data"
head -1921 "$HERE/data/SST-2/train.tsv" > "$WORK/data/train.tsv"   # header + 1920 sentences

train() {  # train THREADS -> prints seconds
  rm -rf "$WORK/out"
  t0=$(date +%s.%N)
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ${EST_ENV:-} "$EST" run_classifier --task_name=sst-2 \
    --do_train --data_dir="$WORK/data" --vocab_file="$HERE/data/vocab.txt" \
    --bert_config_file="$HERE/data/bert_config.json" --max_seq_length=64 --train_batch_size=32 \
    --learning_rate=3e-4 --num_train_epochs=1 --save_checkpoints_steps=1000 \
    --num_threads="$1" --output_dir="$WORK/out" > "$WORK/log" 2>&1 || { cat "$WORK/log" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }'; }
start_neighbour() {  # start_neighbour [CPU]
  if [ -n "${1:-}" ]; then setsid taskset -c "$1" sh -c 'while :; do :; done' & else setsid sh -c 'while :; do :; done' & fi
  NEIGHBOUR=$!
  sleep 0.5
}
stop_neighbour() { kill "$NEIGHBOUR" 2>/dev/null || true; wait "$NEIGHBOUR" 2>/dev/null || true; NEIGHBOUR=; }

LAST_CPU=$(($(nproc) - 1))
printf "%-10s %10s %10s   (seconds, best of %s; est env: %s; load before: %s)\n" setting "1 thread" "2 threads" \
  "$ROUNDS" "${EST_ENV:-default}" "$(cut -d' ' -f1-3 /proc/loadavg)"
for setting in quiet neighbour pinned; do
  case $setting in
    neighbour) start_neighbour ;;
    pinned) start_neighbour "$LAST_CPU" ;;
  esac
  one=; two=; r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    one=$(best "$one" "$(train 1)"); two=$(best "$two" "$(train 2)")
    r=$((r + 1))
  done
  [ "$setting" = quiet ] || stop_neighbour
  printf "%-10s %10s %10s\n" "$setting" "$one" "$two"
done
