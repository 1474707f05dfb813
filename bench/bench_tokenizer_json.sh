#!/usr/bin/env bash
# tokenizer.json encode speed, est vs HuggingFace `tokenizers` (PyPI, make interop's venv), on
# the real files of ../shared/data/tokenizers and make interop's generated multilingual lines
# (tests/interop/test_tokenizers.py text_lines, 20 scripts), 1 and 2 threads, with a line-by-line
# check that both give the same ids. bench/README.md has the figures.
#
#   bench/bench_tokenizer_json.sh [BUILD_DIR] [LINES] [FILES...]
#
# LINES defaults to 100000; FILES to the five files. REPEATS (default 3) sets best-of. With
# perf installed, one more 1-thread est run under `perf record --call-graph dwarf` gives the
# shares of encode time in the normalizer, the pre-tokenizer and the model (inclusive samples of
# normalizer_apply, pretokenizer_apply, the model's tokenize function), the rest being added
# tokens, UTF-8 decoding, alignment bookkeeping, post-processing and allocation.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
nlines="${2:-100000}"
shift $(( $# > 2 ? 2 : $# ))
shared="${EST_SHARED_TOKENIZERS:-$root/../shared/data/tokenizers}"
[ -d "$shared" ] || { echo "bench_tokenizer_json: no $shared (set EST_SHARED_TOKENIZERS)" >&2; exit 1; }
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(bert-base-multilingual-cased albert-base-v2 gpt2 t5 open-llama-3b)
repeats="${REPEATS:-3}"
venv="${INTEROP_VENV:-$root/.venv-interop}"
[ -x "$venv/bin/python" ] || { echo "needs make interop's venv ($venv)" >&2; exit 1; }
[ -x "$build/bench_tokenizer_json" ] || cmake --build "$build" --target bench_tokenizer_json >/dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$root/bench/bench_tokenizer_json_hf.py" --lines "$nlines" "$work/lines.txt"
echo "lines: $(wc -l < "$work/lines.txt"), $(wc -c < "$work/lines.txt") bytes; CPU: $(lscpu | sed -n 's/^Model name: *//p')"
secs() { sed -E 's/.* ([0-9.]+) s = .*/\1/'; }
for name in "${files[@]}"; do
  f="$shared/$name.tokenizer.json"
  [ -f "$f" ] || { echo "$name: $f absent, skipped"; continue; }
  echo "=== $name"
  for t in 1 2; do
    ours=$("$build/bench_tokenizer_json" "$f" "$work/lines.txt" "$t" "$repeats" "$work/est_ids.txt")
    theirs=$(RAYON_NUM_THREADS=$t TOKENIZERS_PARALLELISM=true \
             "$venv/bin/python" "$root/bench/bench_tokenizer_json_hf.py" "$f" "$work/lines.txt" "$repeats" "$work/hf_ids.txt")
    echo "$ours"
    echo "$theirs"
    awk -v a="$(echo "$ours" | secs)" -v b="$(echo "$theirs" | secs)" -v t="$t" \
      'BEGIN { printf "%d thread(s): HF time / est time = %.2fx\n", t, b / a }'
    echo "lines with different ids: $(paste -d'\t' "$work/est_ids.txt" "$work/hf_ids.txt" | awk -F'\t' '$1 != $2' | wc -l)"
  done
  if command -v perf >/dev/null 2>&1; then
    perf record -q --call-graph dwarf -F 1000 -o "$work/perf.data" \
      "$build/bench_tokenizer_json" "$f" "$work/lines.txt" 1 1 >/dev/null 2>&1 || continue
    perf report -i "$work/perf.data" --children --stdio --sort symbol 2>/dev/null |
      awk '$3 == "[.]" { sub("%", "", $1); v[$4] = $1 }
           END { m = v["model_tokenize"]; split("unigram_tokenize bpe_tokenize wordpiece_tokenize wordlevel_tokenize", k, " ")
                 for (i in k) if (v[k[i]] > m) m = v[k[i]]
                 e = v["tok_pipeline_encode"]; if (!e) exit
                 printf "encode time: normalizer %.0f%%, pre-tokenizer %.0f%%, model %.0f%%, the rest %.0f%%\n",
                        100 * v["normalizer_apply"] / e, 100 * v["pretokenizer_apply"] / e, 100 * m / e,
                        100 * (e - v["normalizer_apply"] - v["pretokenizer_apply"] - m) / e }'
  fi
done
