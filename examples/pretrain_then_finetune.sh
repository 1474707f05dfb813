#!/bin/sh
# Worked example: pretrain a small BERT on a corpus with est, then fine-tune it, against
# fine-tuning the same model from scratch on the same budget.
#
#   examples/pretrain_then_finetune.sh [GLUE_SST2_DIR] [VOCAB] [WORK_DIR] [PRETRAIN_STEPS]
#
# 1. corpus: the SST-2 training sentences (GLUE), 5 to a document -> est create_pretraining_data
#    (seq 64, 10 predictions, dupe_factor 5);
# 2. est run_pretraining: BERT-Tiny's shape (L2 H128 A2 I512, vocab 30522) from scratch,
#    PRETRAIN_STEPS steps of batch 32, lr 5e-4, warmup 5%, a checkpoint every 100 steps;
#    eval on the first 20 batches;
# 3. est run_classifier on SST-2 with a 2000-example train split, 5 epochs, lr 3e-4, seq 64:
#    once --init_checkpoint=the pretrained model, once from scratch; dev accuracy of both.
# README.md ("Pretraining BERT") gives what it measured.
# Prints the pretraining loss curve (every 50 steps) and the two eval_results.txt.
set -e
SST=${1:-data/SST-2}                     # the bundled GLUE SST-2 (data/README.md)
VOCAB=${2:-data/vocab.txt}                # bert-base-uncased vocab
W=${3:-/tmp/est_pretrain_example}
STEPS=${4:-2000}
FT_STEP=${FT_STEP:-$STEPS}                # the pretraining checkpoint to fine-tune from
EST=${EST:-build/est}
rm -rf "$W"
mkdir -p "$W/sst_small"
awk -F'\t' 'NR > 1 { print $1; if ((NR - 1) % 5 == 0) print "" }' "$SST/train.tsv" > "$W/corpus.txt"
head -n 2001 "$SST/train.tsv" > "$W/sst_small/train.tsv"
cp "$SST/dev.tsv" "$SST/test.tsv" "$W/sst_small/"
cat > "$W/bert_config.json" <<JSON
{"vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 512, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2}
JSON
"$EST" create_pretraining_data --input_file="$W/corpus.txt" --output_file="$W/corpus.tfrecord" \
  --vocab_file="$VOCAB" --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=5 --random_seed=1 \
  2> "$W/create.log"
"$EST" run_pretraining --bert_config_file="$W/bert_config.json" --input_file="$W/corpus.tfrecord" \
  --output_dir="$W/pretrained" --do_train --do_eval --max_seq_length=64 --max_predictions_per_seq=10 \
  --train_batch_size=32 --eval_batch_size=32 --num_train_steps="$STEPS" --num_warmup_steps=$((STEPS / 20)) \
  --learning_rate=5e-4 --save_checkpoints_steps=100 --keep_checkpoint_max=0 --max_eval_steps=20 \
  --log_step_count_steps=25 --seed=1 2> "$W/pretrain.log"
echo "pretraining loss (step: loss):"
grep -o 'loss = [0-9.]*, step = [0-9]*' "$W/pretrain.log" | awk '{ print "  " $6 ": " $3 }' | tr -d ,
echo "pretraining eval:"; sed 's/^/  /' "$W/pretrained/eval_results.txt"
for run in pretrained scratch; do
  init=
  [ "$run" = pretrained ] && init="--init_checkpoint=$W/pretrained/model.ckpt-$FT_STEP"
  "$EST" run_classifier --task_name=sst-2 --data_dir="$W/sst_small" --vocab_file="$VOCAB" \
    --bert_config_file="$W/bert_config.json" $init --output_dir="$W/ft_$run" --do_train --do_eval \
    --max_seq_length=64 --train_batch_size=32 --num_train_epochs=5 --learning_rate=3e-4 \
    --warmup_proportion=0.1 --seed=1 \
    2> "$W/ft_$run.log"
  echo "fine-tuned ($run):"; sed 's/^/  /' "$W/ft_$run/eval_results.txt"
done
