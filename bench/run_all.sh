#!/bin/sh
# `make bench`: every side-by-side benchmark, one after the other, each printing its own
# ratios against the peer (see bench/README.md for what each measures and the figures
# recorded so far). Benchmarks that compare with PyTorch unset OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE in their own commands (they say so); the others leave them alone.
#
#   sh bench/run_all.sh [BUILD_DIR]
#
# BENCH_SKIP="base dist" skips the slow BERT-Base rows and the MPI bench, for a quick look.
# BENCH_SQUAD_FILE=dev.json (a SQuAD JSON file) adds the SQuAD feature-conversion comparison.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SKIP=${BENCH_SKIP:-}
cmake --build "$BUILD" --target bench_tfrecord bench_tokenizer bench_bert bench_ckpt bench_squad_features >/dev/null
skipped() { case " $SKIP " in *" $1 "*) return 0 ;; esac; return 1; }

echo "=== TFRecord read + verify, Example parsing"
"$BUILD/bench_tfrecord"

echo "=== Tokenizer: est vs HuggingFace tokenizers (npm), one thread"
if command -v npm >/dev/null 2>&1; then bash bench/bench_tokenizer.sh "$BUILD"
else echo "skipped: npm not installed"; fi

echo "=== BERT classifier train step and inference: est vs PyTorch"
MODELS="tiny mini base"
skipped base && MODELS="tiny mini"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then sh bench/run_bert.sh "$BUILD" 2 2 "$MODELS"
else echo "skipped: python3-torch not installed (apt-get install python3-torch)"; fi

echo "=== BERT classifier: est fp32/bf16 vs PyTorch 1.13, PyTorch 2 and ONNX Runtime (PyPI venv)"
# the venv is ~5 GB from PyPI: `make bench` uses it when it exists and never makes it
if [ -x bench/peers/.venv/bin/python ]; then sh bench/run_peers.sh "$BUILD" 2 1 "$MODELS"
else echo "skipped: no bench/peers/.venv (sh bench/peers/setup.sh makes it)"; fi

echo "=== run_classifier end to end on MRPC: est vs PyTorch"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then sh bench/run_classifier_mrpc.sh "$BUILD"
else echo "skipped: python3-torch not installed"; fi

echo "=== Checkpoints: save/restore vs torch.save/torch.load"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then sh bench/bench_ckpt.sh "$BUILD"
else echo "skipped: python3-torch not installed"; fi

echo "=== SQuAD model at seq 384 (est run_squad's model_fn vs PyTorch, interop venv)"
if [ -x .venv-interop/bin/python ]; then sh bench/run_squad_model.sh "$BUILD" 2 3 "tiny mini small" 8
else echo "skipped: no .venv-interop (make interop makes it)"; fi

echo "=== SQuAD feature conversion: est vs run_squad.py (bert-tensorflow 1.0.4, interop venv)"
if [ -n "${BENCH_SQUAD_FILE:-}" ] && [ -x .venv-interop/bin/python ]; then
  sh bench/run_squad_features.sh "$BENCH_SQUAD_FILE" 10 3 "$BUILD"
else echo "skipped: set BENCH_SQUAD_FILE=<a SQuAD json> (and make interop for .venv-interop)"; fi

if ! skipped dist && [ -x "$BUILD/bench_dist" ]; then
  echo "=== Data parallel: 1 vs 2 ranks"
  "$BUILD/bench_dist"
fi
