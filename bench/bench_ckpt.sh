#!/bin/sh
# Save/restore of BERT-base's 206 pre-training variables (110M floats, 440 MB): est's TF
# checkpoint and safetensors writers/readers (bench_ckpt) next to torch.save/torch.load
# (bench/ckpt_torch.py, /usr/bin/python3 with python3-torch). Files go to a fresh temp dir
# (TMPDIR), removed at the end.  Usage: bench/bench_ckpt.sh [BUILD_DIR] [LAYERS HIDDEN VOCAB]
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
dir=$(mktemp -d "${TMPDIR:-/tmp}/est-bench-ckpt-XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "== est ($BUILD/bench_ckpt)"
"$BUILD/bench_ckpt" "$dir" "$@"
ls -l "$dir"
echo "== PyTorch"
/usr/bin/python3 bench/ckpt_torch.py "$dir" "$@"
ls -l "$dir/model.pt"
