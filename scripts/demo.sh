#!/bin/sh
# make demo: fine-tune a small BERT (BERT-Tiny's shape: 2 layers, hidden 128, 2 heads,
# intermediate 512) from scratch on the bundled SST-2 for one epoch, evaluate it on the
# dev set and predict the test set. No pretrained weights are shipped, so the model starts
# from random initialisation; see README.md for what it reaches and how long it takes.
#
#   sh scripts/demo.sh [path/to/est] [output_dir]
set -eu

EST=${1:-build/est}
OUT=${2:-out/sst2}
# scripts/demo_pretrained.sh runs the same recipe from a pretrained model's directory and
# from scratch, both on a budget of steps (DEMO_EPOCHS, a fraction of the epoch), logging
# more often (DEMO_LOG_STEPS) and without the test set's predictions (DEMO_PREDICT=false)
MODEL_FLAGS=${DEMO_MODEL_FLAGS:---vocab_file=data/vocab.txt --bert_config_file=data/bert_config.json}
LEARNING_RATE=${DEMO_LEARNING_RATE:-3e-4}
EPOCHS=${DEMO_EPOCHS:-1}
LOG_STEPS=${DEMO_LOG_STEPS:-100}
PREDICT_FLAG=--do_predict
[ "${DEMO_PREDICT:-true}" = true ] || PREDICT_FLAG=

if [ ! -x "$EST" ]; then
  echo "demo: $EST not found; run 'make demo' (or 'make' first)" >&2
  exit 1
fi

# A fresh start each time: run_classifier resumes from checkpoints in output_dir, and the
# demo is meant to show the whole run.
rm -rf "$OUT"

start=$(date +%s)
"$EST" run_classifier \
  --task_name=sst-2 \
  --do_train --do_eval $PREDICT_FLAG \
  --data_dir=data/SST-2 \
  $MODEL_FLAGS \
  --max_seq_length=64 \
  --train_batch_size=32 \
  --eval_batch_size=32 \
  --predict_batch_size=32 \
  --learning_rate="$LEARNING_RATE" \
  --warmup_proportion=0.1 \
  --num_train_epochs="$EPOCHS" \
  --save_checkpoints_steps=1000 \
  --log_step_count_steps="$LOG_STEPS" \
  --output_dir="$OUT"
end=$(date +%s)

echo
echo "demo: finished in $((end - start)) s"
echo "demo: dev-set results   $OUT/eval_results.txt"
sed 's/^/    /' "$OUT/eval_results.txt"
if [ -n "$PREDICT_FLAG" ]; then
  echo "demo: test predictions  $OUT/test_results.tsv ($(wc -l < "$OUT/test_results.tsv") lines: P(negative) TAB P(positive))"
fi
