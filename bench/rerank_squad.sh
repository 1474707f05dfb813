#!/bin/sh
# The reranking comparison (issue 49, docs/rerank.md §7): a cross-encoder fine-tuned by est from
# all-MiniLM-L6-v2 on SQuAD question -> paragraph pairs, the same model untrained (a new random
# head) and BM25, ranking held-out questions' paragraphs. At this budget (64 steps) fine-tuning
# beats the untrained model but not BM25 (docs/rerank.md §7 has the numbers).
#   sh bench/rerank_squad.sh [BUILD_DIR] [OUT_DIR]
# Data: ../shared/data/squad/train-v1.1-first11.json ($SQUAD_JSON), read from there; pairs by
# bench/rerank_squad.py (8 articles train, 3 held out; 10 candidates a held-out question).
# The model: $EST_MINILM_DIR, else out/all-MiniLM-L6-v2 (where `make demo-pretrained` puts it).
set -eu
build=${1:-build}
out=${2:-out/rerank-squad}
here=$(cd "$(dirname "$0")" && pwd)
squad=${SQUAD_JSON:-$here/../../shared/data/squad/train-v1.1-first11.json}
minilm=${EST_MINILM_DIR:-out/all-MiniLM-L6-v2}
[ -f "$minilm/model.safetensors" ] || {
  echo "rerank_squad: no $minilm/model.safetensors; run 'make demo-pretrained' once or set EST_MINILM_DIR" >&2
  exit 1
}
[ -f "$squad" ] || { echo "rerank_squad: no $squad (set SQUAD_JSON)" >&2; exit 1; }
mkdir -p "$out"
python3 "$here/rerank_squad.py" build "$squad" "$out/data"
common="--data_dir=$out/data --init_checkpoint=$minilm --bert_config_file=$minilm --max_seq_length=128
        --eval_batch_size=32 --num_threads=2"
# untrained: all-MiniLM-L6-v2's encoder, the classifier's fresh head (seed 12345)
rm -rf "$out/untrained" "$out/trained"
t0=$(date +%s)
# shellcheck disable=SC2086
"$build/est" run_rerank $common --output_dir="$out/untrained" --do_eval 2>"$out/untrained.log"
t1=$(date +%s)
# 256 questions x (1 positive + 3 negatives) = 1024 pairs, batch 16, 1 epoch: 64 steps
# shellcheck disable=SC2086
"$build/est" run_rerank $common --output_dir="$out/trained" --do_train --do_eval --train_batch_size=16 \
  --learning_rate=5e-5 --num_train_epochs=1 --save_checkpoints_steps=1000 2>"$out/trained.log"
t2=$(date +%s)
python3 "$here/rerank_squad.py" bm25 "$squad" "$out/data" > "$out/bm25.txt"
get() { sed -n "s/^$2 = //p" "$1"; }
printf '%-44s %-10s %-10s\n' "held-out questions (60, 10 paragraphs each)" "MRR@10" "NDCG@10"
printf '%-44s %-10s %-10s\n' "BM25 (k1 1.2, b 0.75)" "$(get "$out/bm25.txt" bm25_mrr@10)" \
  "$(get "$out/bm25.txt" bm25_ndcg@10)"
printf '%-44s %-10s %-10s (%s s)\n' "all-MiniLM-L6-v2, untrained head" \
  "$(get "$out/untrained/eval_results.txt" eval_mrr@10)" "$(get "$out/untrained/eval_results.txt" eval_ndcg@10)" \
  $((t1 - t0))
printf '%-44s %-10s %-10s (%s s)\n' "all-MiniLM-L6-v2 fine-tuned by est, 64 steps" \
  "$(get "$out/trained/eval_results.txt" eval_mrr@10)" "$(get "$out/trained/eval_results.txt" eval_ndcg@10)" \
  $((t2 - t1))
