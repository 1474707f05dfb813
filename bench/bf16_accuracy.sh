#!/bin/sh
# bf16 against fp32 where it matters to a user: the same fine-tuning runs at
# --precision=fp32 and --precision=bf16 (from scratch: no pretrained weights ship), their
# dev-set results, and est predict's probabilities from one exported model at both
# precisions. Long runs, not timings (README.md, "bf16 mixed precision").
#
#   sh bench/bf16_accuracy.sh [BUILD_DIR] [THREADS] [OUT]
#
#   demo   scripts/demo.sh's recipe (BERT-Tiny shape, seq 64, one epoch of the bundled
#          SST-2: 2104 steps), dev accuracy
#   mrpc   bench/run_classifier_mrpc.sh's recipe (BERT-Tiny shape, seq 128, 3 epochs),
#          dev accuracy and F1
#   predict  the fp32 demo model exported, est predict on the 1821 SST-2 test sentences at
#          both precisions: the largest difference of a probability, and how many labels flip
set -eu
BUILD=${1:-build}
THREADS=${2:-1}
OUT=${3:-$(mktemp -d "${TMPDIR:-/tmp}/est-bf16-acc-XXXXXX")}
EST="$BUILD/est"
[ -x "$EST" ] || { echo "bf16_accuracy.sh: $EST not found (run make)" >&2; exit 1; }
mkdir -p "$OUT"
echo "bf16_accuracy: $EST, $THREADS thread(s), output in $OUT"

DEMO="--task_name=sst-2 --do_train --do_eval --data_dir=data/SST-2 --vocab_file=data/vocab.txt \
 --bert_config_file=data/bert_config.json --max_seq_length=64 --train_batch_size=32 --eval_batch_size=32 \
 --learning_rate=3e-4 --warmup_proportion=0.1 --num_train_epochs=1 --save_checkpoints_steps=1000 \
 --log_step_count_steps=500"
MRPC="--task_name=mrpc --do_train --do_eval --data_dir=data/MRPC --vocab_file=data/vocab.txt \
 --bert_config_file=data/bert_config.json --max_seq_length=128 --train_batch_size=32 --eval_batch_size=8 \
 --learning_rate=2e-4 --warmup_proportion=0.1 --num_train_epochs=3 --save_checkpoints_steps=1000"

key() { sed -n "s/^$2 = //p" "$1/eval_results.txt"; }
for p in fp32 bf16; do
  # shellcheck disable=SC2086
  "$EST" run_classifier $DEMO --precision=$p --num_threads="$THREADS" --output_dir="$OUT/demo-$p" \
    > "$OUT/demo-$p.log" 2>&1 || { tail -20 "$OUT/demo-$p.log"; exit 1; }
  # shellcheck disable=SC2086
  "$EST" run_classifier $MRPC --precision=$p --num_threads="$THREADS" --output_dir="$OUT/mrpc-$p" \
    > "$OUT/mrpc-$p.log" 2>&1 || { tail -20 "$OUT/mrpc-$p.log"; exit 1; }
done
"$EST" run_classifier --task_name=sst-2 --do_export --data_dir=data/SST-2 --vocab_file=data/vocab.txt \
  --bert_config_file=data/bert_config.json --max_seq_length=64 --output_dir="$OUT/demo-fp32" \
  > "$OUT/export.log" 2>&1 || { tail -20 "$OUT/export.log"; exit 1; }
cut -f2 data/SST-2/test.tsv | tail -n +2 > "$OUT/test_sentences.txt"
for p in fp32 bf16; do
  "$EST" predict --export_dir="$OUT/demo-fp32/export" --input_file="$OUT/test_sentences.txt" \
    --precision=$p --num_threads="$THREADS" > "$OUT/predict-$p.tsv" 2> "$OUT/predict-$p.log" ||
    { tail -20 "$OUT/predict-$p.log"; exit 1; }
done

for task in demo mrpc; do
  printf '%-5s fp32 accuracy %s  bf16 accuracy %s' "$task" "$(key "$OUT/$task-fp32" eval_accuracy)" \
    "$(key "$OUT/$task-bf16" eval_accuracy)"
  [ "$task" = mrpc ] && printf '  fp32 F1 %s  bf16 F1 %s' "$(key "$OUT/$task-fp32" eval_f1)" \
    "$(key "$OUT/$task-bf16" eval_f1)"
  echo
done
paste "$OUT/predict-fp32.tsv" "$OUT/predict-bf16.tsv" | awk -F'\t' '
  { n = NF / 2; lf = 1; lb = 1
    for (i = 1; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d; if (d > max) max = d
                               if ($i > $lf) lf = i; if ($(i + n) > $(lb + n)) lb = i }
    if (lf != lb) flips++; rows++ }
  END { printf "predict %d sentences: max |p_bf16 - p_fp32| %.5f, %d labels flip\n", rows, max, flips + 0 }'
