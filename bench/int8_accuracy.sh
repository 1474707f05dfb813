#!/bin/sh
# int8 accuracy of est and of ONNX Runtime's quantize_dynamic on the same fine-tuned models
# (issue 36 item 3; bench/README.md, "int8 accuracy next to ONNX Runtime's"). Each model is
# trained by est in fp32, evaluated by est fp32 and est --precision=int8 from the same
# checkpoint, written as a HuggingFace directory (`est ckpt export_hf`) and evaluated by ONNX
# Runtime fp32 and int8 (bench/peers/ort_int8_accuracy.py, ort_int8_squad.py):
#   demo   the demo's SST-2 model (scripts/demo.sh: BERT-Tiny's shape, one epoch, seq 64)
#   mrpc   MRPC, bench/run_classifier_mrpc.sh's recipe (BERT-Tiny's shape, 3 epochs, seq 128)
#   minilm SST-2 from all-MiniLM-L6-v2, 150 steps at 1e-4, seq 64 (needs MINILM)
#   squad  SQuAD 1.1 from all-MiniLM-L6-v2 (needs MINILM and SQUAD_DIR)
#   sts    all-MiniLM-L6-v2's sentence embeddings as they are (`est embed`), STS-B dev's
#          Spearman correlation (needs MINILM and STS_DEV)
#
#   sh bench/int8_accuracy.sh [EST] [OUT] [MODELS]
#
# PY=python          TensorFlow 2.15 + bert-tensorflow (squad only), torch, transformers, onnx,
#                    onnxruntime 1.23: `make interop`'s venv with onnx and onnxruntime added
# MINILM=DIR         all-MiniLM-L6-v2's HuggingFace directory (scripts/demo_pretrained.sh's)
# SQUAD_DIR=DIR      train_part.json and dev5_v1.json from bench/squad_int8_prepare.py
# STS_DEV=FILE       GLUE's STS-B dev.tsv (1500 sentence pairs with gold scores 0-5)
# 2 threads throughout; the figures are accuracies, not timings.
set -eu
EST=${1:-build/est}
OUT=${2:-out/int8_accuracy}
MODELS=${3:-demo mrpc minilm squad sts}
PY=${PY:-.venv-interop/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=2
mkdir -p "$OUT"

# classifier NAME TASK DATA SEQ "MODEL_FLAGS" "TRAIN_FLAGS" CONFIG VOCAB: train, est fp32 and int8,
# ONNX Runtime (CONFIG and VOCAB: what export_hf writes the HuggingFace directory from)
classifier() {
  name=$1 task=$2 data=$3 seq=$4 model=$5 train=$6
  common="--task_name=$task --data_dir=$data $model --max_seq_length=$seq --eval_batch_size=32 \
    --predict_batch_size=32 --num_threads=2"
  rm -rf "$OUT/$name" "$OUT/${name}_int8"
  # shellcheck disable=SC2086
  "$EST" run_classifier $common $train --do_train --do_eval --do_predict --output_dir="$OUT/$name" \
    > "$OUT/$name.log" 2>&1
  ckpt=$(sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' "$OUT/$name/checkpoint")
  mkdir "$OUT/${name}_int8"
  cp "$OUT/$name/checkpoint" "$OUT/$name/$ckpt".* "$OUT/${name}_int8/"
  # shellcheck disable=SC2086
  "$EST" run_classifier $common --do_eval --do_predict --precision=int8 --output_dir="$OUT/${name}_int8" \
    > "$OUT/${name}_int8.log" 2>&1
  echo "$name est fp32: $(tr '\n' ' ' < "$OUT/$name/eval_results.txt")"
  echo "$name est int8: $(tr '\n' ' ' < "$OUT/${name}_int8/eval_results.txt")"
  "$EST" ckpt export_hf "$OUT/$name/$ckpt" "$OUT/${name}_hf" --bert_config_file="$7" --vocab_file="$8" \
    --labels=0,1 --do_lower_case=true > /dev/null 2>&1
  "$PY" "$HERE/peers/ort_int8_accuracy.py" --task "$task" --hf_dir "$OUT/${name}_hf" --data_dir "$data" \
    --max_seq_length "$seq" --out "$OUT/${name}_onnx" --est_fp32 "$OUT/$name/test_results.tsv" \
    --est_int8 "$OUT/${name}_int8/test_results.tsv" 2> "$OUT/${name}_onnx.log" | sed "s/^/$name ort: /"
}

for m in $MODELS; do
  case $m in
  demo)
    classifier demo sst-2 data/SST-2 64 "--vocab_file=data/vocab.txt --bert_config_file=data/bert_config.json" \
      "--train_batch_size=32 --learning_rate=3e-4 --warmup_proportion=0.1 --num_train_epochs=1" \
      data/bert_config.json data/vocab.txt ;;
  mrpc)
    classifier mrpc mrpc data/MRPC 128 "--vocab_file=data/vocab.txt --bert_config_file=data/bert_config.json" \
      "--train_batch_size=32 --learning_rate=2e-4 --warmup_proportion=0.1 --num_train_epochs=3" \
      data/bert_config.json data/vocab.txt ;;
  minilm)
    classifier minilm sst-2 data/SST-2 64 "--init_checkpoint=$MINILM --bert_config_file=$MINILM" \
      "--train_batch_size=32 --learning_rate=1e-4 --warmup_proportion=0.1 --num_train_epochs=0.07128" \
      "$MINILM/config.json" "$MINILM/tokenizer.json" ;;
  squad)
    sq="--vocab_file=$MINILM/tokenizer.json --bert_config_file=$MINILM/config.json --max_seq_length=256 \
      --doc_stride=128 --num_threads=2"
    rm -rf "$OUT/squad" "$OUT/squad_fp32" "$OUT/squad_int8"
    # shellcheck disable=SC2086
    "$EST" run_squad $sq --init_checkpoint="$MINILM" --do_train --train_file="$SQUAD_DIR/train_part.json" \
      --output_dir="$OUT/squad" --train_batch_size=16 --learning_rate=1e-4 --num_train_epochs=2 \
      > "$OUT/squad.log" 2>&1
    ckpt=$(sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' "$OUT/squad/checkpoint")
    for p in fp32 int8; do
      mkdir "$OUT/squad_$p"
      cp "$OUT/squad/checkpoint" "$OUT/squad/$ckpt".* "$OUT/squad_$p/"
      # shellcheck disable=SC2086
      "$EST" run_squad $sq --do_predict --predict_file="$SQUAD_DIR/dev5_v1.json" --output_dir="$OUT/squad_$p" \
        --precision=$p > "$OUT/squad_$p.log" 2>&1
      echo "squad est $p: $("$EST" squad_eval --data_file="$SQUAD_DIR/dev5_v1.json" \
        --pred_file="$OUT/squad_$p/predictions.json")"
    done
    "$EST" ckpt export_hf "$OUT/squad/$ckpt" "$OUT/squad_hf" --bert_config_file="$MINILM/config.json" \
      --vocab_file="$MINILM/tokenizer.json" --do_lower_case=true > /dev/null 2>&1
    "$PY" "$HERE/peers/ort_int8_squad.py" --hf_dir "$OUT/squad_hf" --predict_file "$SQUAD_DIR/dev5_v1.json" \
      --max_seq_length 256 --doc_stride 128 --out "$OUT/squad_onnx" > "$OUT/squad_onnx.log" 2>&1
    for p in fp32 int8; do
      echo "squad ort $p: $("$EST" squad_eval --data_file="$SQUAD_DIR/dev5_v1.json" \
        --pred_file="$OUT/squad_onnx/$p/predictions.json")"
    done
    "$PY" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
p = {k: json.load(open("%s/%s/predictions.json" % (out, d))) for k, d in
     (("est fp32", "squad_fp32"), ("est int8", "squad_int8"), ("ort fp32", "squad_onnx/fp32"),
      ("ort int8", "squad_onnx/int8"))}
same = lambda a, b: sum(p[a][q] == p[b][q] for q in p[a])
print("squad same answer text of %d: est int8 = est fp32 %d, ort int8 = ort fp32 %d, est fp32 = ort fp32 %d"
      % (len(p["est fp32"]), same("est int8", "est fp32"), same("ort int8", "ort fp32"), same("est fp32", "ort fp32")))
PY
    ;;
  sts)
    # est embed pools and normalises as the directory's sentence-transformers files say (mean)
    for p in fp32 int8; do
      for c in 8 9; do
        cut -f$c "$STS_DEV" | sed '1{/^sentence[12]$/d}' | "$EST" embed --model_dir="$MINILM" --output_format=tsv \
          --precision=$p --num_threads=2 > "$OUT/sts_${p}_$c.tsv" 2> "$OUT/sts_$p.log"
      done
    done
    "$PY" "$HERE/peers/ort_int8_sts.py" --hf_dir "$MINILM" --sts "$STS_DEV" --out "$OUT/sts_onnx" \
      --est "fp32=$OUT/sts_fp32_8.tsv,$OUT/sts_fp32_9.tsv" --est "int8=$OUT/sts_int8_8.tsv,$OUT/sts_int8_9.tsv" \
      2> "$OUT/sts_onnx.log" | sed "s/^/sts: /"
    ;;
  *) echo "int8_accuracy.sh: unknown model $m (demo mrpc minilm squad sts)" >&2; exit 2 ;;
  esac
done
