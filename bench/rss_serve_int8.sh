#!/bin/sh
# `est serve` memory of an int8 export against the fp32 export of the same checkpoint: a
# BERT-Base-shaped classifier trained one epoch of tests/data/glue_mini/SST-2 from scratch (the
# weights do not matter), exported twice (--do_export, then --do_export --precision=int8), each
# served alone (--max_batch_size=32) and sent one :predict request of 32 sentences; prints the
# exports' variables/ sizes and the server's VmRSS and VmHWM (peak) after the answer, for fp32
# run fp32, the fp32 export run --precision=int8 (int8 packed at load), and the int8 export.
#
#   sh bench/rss_serve_int8.sh [BUILD_DIR] [THREADS]
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
THREADS=${2:-2}
EST=$BUILD/est
W=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$W"' EXIT
printf '{"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
 "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
 "num_hidden_layers": 12, "type_vocab_size": 2, "vocab_size": 30522}\n' > "$W/bert_base.json"
FLAGS="--task_name=sst-2 --data_dir=tests/data/glue_mini/SST-2 --vocab_file=data/vocab.txt
  --bert_config_file=$W/bert_base.json --max_seq_length=128 --num_threads=$THREADS --output_dir=$W/run"
# shellcheck disable=SC2086
"$EST" run_classifier --do_train --do_export --train_batch_size=8 --num_train_epochs=1 --export_dir="$W/fp32" \
  $FLAGS >/dev/null 2>&1
# shellcheck disable=SC2086
"$EST" run_classifier --do_export --precision=int8 --export_dir="$W/int8" $FLAGS >/dev/null 2>&1
for e in fp32 int8; do
  printf "export %s: variables/ %s MiB\n" "$e" "$(du -sm "$W/$e"/*/variables | cut -f1)"
done
BODY='{"instances": ['
i=0
while [ $i -lt 32 ]; do
  BODY="$BODY{\"text_a\": \"a sentence of about sixteen tokens that the server answers with probabilities $i\"},"
  i=$((i + 1))
done
BODY="${BODY%,}]}"
for run in "fp32 fp32" "fp32 int8" "int8 int8"; do
  set -- $run
  rm -f "$W/out"
  "$EST" serve --model_base_path="$W/$1" --model_name=bench --rest_api_port=0 --num_threads="$THREADS" \
    --max_batch_size=32 --precision="$2" --file_system_poll_wait_seconds=0 > "$W/out" 2> "$W/err" &
  PID=$!
  while ! grep -q "listening on" "$W/out" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || { cat "$W/err" >&2; exit 1; }
    sleep 0.1
  done
  PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$W/out")
  curl -sf -d "$BODY" "http://127.0.0.1:$PORT/v1/models/bench:predict" > /dev/null
  printf "export %s run %s: " "$1" "$2"
  awk '/^VmRSS|^VmHWM/ { printf "%s %d MiB  ", $1, $2 / 1024 } END { print "" }' "/proc/$PID/status"
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
done
