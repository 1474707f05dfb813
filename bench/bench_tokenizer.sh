#!/usr/bin/env bash
# Single-thread tokenizer speed, est vs HuggingFace `tokenizers` (npm), on SST-2 train.tsv
# (67,349 sentences), with a line-by-line check that both produce the same ids.
#
#   bench/bench_tokenizer.sh [BUILD_DIR] [TSV] [VOCAB]
#
# Defaults: build/, data/SST-2/train.tsv (column 0, header skipped), data/vocab.txt (uncased).
# The npm package is installed on first use into $HF_TOKENIZERS_DIR (default
# /tmp/est-bench-hf), outside the repository. Needs node + npm; est itself does not.
# When the `make interop` venv exists (.venv-interop/, or $INTEROP_VENV), the PyPI package
# `tokenizers` runs too (bench_tokenizer_hf.py), the same setup from Python.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
tsv="${2:-$root/data/SST-2/train.tsv}"
vocab="${3:-$root/data/vocab.txt}"
hf_dir="${HF_TOKENIZERS_DIR:-/tmp/est-bench-hf}"
repeats="${REPEATS:-5}"

if [ ! -x "$build/bench_tokenizer" ]; then
  cmake --build "$build" --target bench_tokenizer >/dev/null
fi
if [ ! -d "$hf_dir/node_modules/tokenizers" ]; then
  mkdir -p "$hf_dir"
  (cd "$hf_dir" && npm install --silent --no-audit --no-fund tokenizers >/dev/null)
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tail -n +2 "$tsv" | cut -f1 > "$work/sentences.txt"

# One thread on both sides: rayon (HF's thread pool) is pinned to 1.
ours=$("$build/bench_tokenizer" "$vocab" "$work/sentences.txt" "$work/est_ids.txt" "$repeats")
theirs=$(cd "$work" && NODE_PATH="$hf_dir/node_modules" RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
         node "$root/bench/bench_tokenizer_hf.js" "$vocab" "$work/sentences.txt" "$work/hf_ids.txt" "$repeats")
echo "$ours"
echo "$theirs"
t_est=$(echo "$ours" | sed -E 's/.* ([0-9.]+) s = .*/\1/')
t_hf=$(echo "$theirs" | sed -E 's/.* ([0-9.]+) s = .*/\1/')
awk -v a="$t_est" -v b="$t_hf" 'BEGIN { printf "speed ratio (HF time / est time): %.1fx\n", b / a }'

venv="${INTEROP_VENV:-$root/.venv-interop}"
if [ -x "$venv/bin/python" ]; then
  py=$(cd "$work" && RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
       "$venv/bin/python" "$root/bench/bench_tokenizer_hf.py" "$vocab" "$work/sentences.txt" "$work/hfpy_ids.txt" "$repeats")
  echo "$py"
  t_py=$(echo "$py" | sed -E 's/.* ([0-9.]+) s = .*/\1/')
  awk -v a="$t_est" -v b="$t_py" 'BEGIN { printf "speed ratio (HF Python time / est time): %.1fx\n", b / a }'
  echo "sentences where Python and node HF ids differ: $(paste -d'\t' "$work/hfpy_ids.txt" "$work/hf_ids.txt" | awk -F'\t' '$1 != $2' | wc -l)"
  echo "sentences where est and Python HF ids differ: $(paste -d'\t' "$work/est_ids.txt" "$work/hfpy_ids.txt" | awk -F'\t' '$1 != $2' | wc -l)"
fi

# Same ids on every sentence? Print the count and the first few differing lines.
differ=$(paste -d'\t' "$work/est_ids.txt" "$work/hf_ids.txt" | awk -F'\t' '$1 != $2' | wc -l)
total=$(wc -l < "$work/sentences.txt")
echo "sentences with different ids: $differ of $total"
if [ "$differ" != 0 ]; then
  paste -d'\t' "$work/sentences.txt" "$work/est_ids.txt" "$work/hf_ids.txt" | awk -F'\t' '$2 != $3' | head -5
fi
