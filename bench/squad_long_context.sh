#!/bin/sh
# A 2000-word context, one question, answered by `est predict` on a squad export of the
# BERT-Tiny shape (data/bert_config.json) at run_squad's defaults (max_seq_length 384,
# doc_stride 128): all windows in one forward pass (--batch_size=32) against one window per
# pass (--batch_size=1). The model is trained for one epoch on the windows fixture only to
# have a checkpoint: the timing does not depend on its weights.
# usage: sh bench/squad_long_context.sh BUILD_DIR THREADS [REPS]
set -eu
BUILD=${1:-build}; THREADS=${2:-2}; REPS=${3:-3}
EST=$BUILD/est
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
$EST run_squad --vocab_file=data/vocab.txt --bert_config_file=data/bert_config.json \
  --train_file=tests/data/squad/windows_v1.json --do_train --do_export --output_dir="$OUT/m" \
  --train_batch_size=4 --num_train_epochs=1 --num_threads="$THREADS" > "$OUT/train.log" 2>&1
python3 - "$OUT/q.jsonl" <<'PY'
import json, sys
ctx = json.load(open("tests/data/squad/windows_v1.json"))["data"][0]["paragraphs"][0]["context"].split()
words = (ctx * (2000 // len(ctx) + 1))[:2000]
open(sys.argv[1], "w").write(json.dumps({"question": "Who was the leader?", "context": " ".join(words)}) + "\n")
PY
lscpu | grep -m1 "Model name"
for bs in 32 1; do
  for r in $(seq "$REPS"); do
    s=$(date +%s.%N)
    $EST predict --export_dir="$OUT/m/export" --input_file="$OUT/q.jsonl" --batch_size=$bs \
      --num_threads="$THREADS" > "$OUT/a.jsonl" 2>/dev/null
    e=$(date +%s.%N)
    echo "batch_size=$bs rep $r: $(echo "$e - $s" | bc) s  $(cat "$OUT/a.jsonl")"
  done
done
